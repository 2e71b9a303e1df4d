//! The report's PNG: p50 and p99 latency against concurrency, drawn with plotters' bitmap
//! backend; labels come from [`crate::font`] so no font is needed at build or run time.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use crate::font;

/// One measured concurrency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub connections: u32,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

const W: u32 = 800;
const H: u32 = 500;
const SCALE: i32 = 2;
const P50: RGBColor = RGBColor(31, 119, 180);
const P99: RGBColor = RGBColor(214, 39, 40);
const GRID: RGBColor = RGBColor(225, 225, 225);
const INK: RGBColor = RGBColor(40, 40, 40);

/// Draws `text` with its top-left corner at pixel (x, y), `SCALE` screen pixels per font pixel.
fn text<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    x: i32,
    y: i32,
    s: &str,
    color: RGBColor,
) -> anyhow::Result<()> {
    for (px, py) in font::pixels(s) {
        let (x0, y0) = (x + px * SCALE, y + py * SCALE);
        area.draw(&Rectangle::new(
            [(x0, y0), (x0 + SCALE, y0 + SCALE)],
            color.filled(),
        ))
        .map_err(|e| anyhow::anyhow!("drawing text: {e}"))?;
    }
    Ok(())
}

/// A step of 1, 2 or 5 × 10^k giving about five ticks up to `max`.
fn tick_step(max: f64) -> f64 {
    let raw = (max / 5.0).max(1e-6);
    let pow = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * pow)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * pow)
}

fn label(v: f64) -> String {
    if v >= 10.0 || v == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Writes the chart of `points` (in the order given, evenly spaced) to `path` as PNG.
pub fn latency_png(path: &Path, title: &str, points: &[Point]) -> anyhow::Result<()> {
    anyhow::ensure!(!points.is_empty(), "no points to draw");
    let root = BitMapBackend::new(path, (W, H)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e}"))?;
    let max_y = points
        .iter()
        .map(|p| p.p99_ms.max(p.p50_ms))
        .fold(0.0, f64::max);
    let step = tick_step(max_y * 1.1);
    let top = (max_y * 1.1 / step).ceil().max(1.0) * step;
    let n = points.len();
    let (left, right, upper, lower) = (80i32, 30i32, 60i32, 70i32);
    let plot = root.margin(upper as u32, lower as u32, left as u32, right as u32);
    let mut chart = ChartBuilder::on(&plot)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0f64..top)
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let area = chart.plotting_area().clone();
    // Horizontal grid lines and their labels.
    let mut y = 0.0;
    while y <= top + step / 2.0 {
        area.draw(&PathElement::new(
            vec![(-0.5, y), (n as f64 - 0.5, y)],
            GRID,
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        let (_, py) = chart.backend_coord(&(0.0, y));
        let s = label(y);
        text(
            &root,
            left - 8 - font::width(&s) * SCALE,
            py - font::HEIGHT,
            &s,
            INK,
        )?;
        y += step;
    }
    // Axes.
    area.draw(&PathElement::new(
        vec![(-0.5, 0.0), (n as f64 - 0.5, 0.0)],
        INK,
    ))
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    area.draw(&PathElement::new(vec![(-0.5, 0.0), (-0.5, top)], INK))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    for (i, p) in points.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64, 0.0));
        let s = p.connections.to_string();
        text(&root, px - font::width(&s) * SCALE / 2, py + 10, &s, INK)?;
    }
    for (color, pick) in [
        (P50, (|p: &Point| p.p50_ms) as fn(&Point) -> f64),
        (P99, |p: &Point| p.p99_ms),
    ] {
        let series: Vec<(f64, f64)> = (0..)
            .zip(points)
            .map(|(i, p)| (f64::from(i), pick(p)))
            .collect();
        chart
            .draw_series(LineSeries::new(series.clone(), color.stroke_width(3)))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        chart
            .draw_series(series.iter().map(|&c| Circle::new(c, 5, color.filled())))
            .map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    text(&root, left, 16, title, INK)?;
    let x_title = "CONNECTIONS";
    text(
        &root,
        (W as i32 - font::width(x_title) * SCALE) / 2,
        H as i32 - 30,
        x_title,
        INK,
    )?;
    text(&root, 12, upper - 30, "MS", INK)?;
    // Legend, top right.
    for (i, (name, color)) in [("P50", P50), ("P99", P99)].into_iter().enumerate() {
        let y = 8 + (i as i32) * 18;
        let x = W as i32 - right - 70;
        root.draw(&Rectangle::new(
            [(x, y + 4), (x + 24, y + 8)],
            color.filled(),
        ))
        .map_err(|e| anyhow::anyhow!("{e}"))?;
        text(&root, x + 32, y, name, INK)?;
    }
    root.present()
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![expect(clippy::expect_used, reason = "test code: a failure should be loud")]

    use super::*;

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(10.0), 2.0);
        assert_eq!(tick_step(3.0), 1.0);
        assert!((tick_step(0.4) - 0.1).abs() < 1e-12);
        assert_eq!(label(0.25), "0.25");
        assert_eq!(label(12.0), "12");
    }

    #[test]
    fn writes_a_png() {
        let dir = std::env::temp_dir().join(format!("bench-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        let path = dir.join("c.png");
        let pts = [
            Point {
                connections: 1,
                p50_ms: 0.3,
                p99_ms: 0.9,
            },
            Point {
                connections: 16,
                p50_ms: 2.0,
                p99_ms: 6.5,
            },
        ];
        latency_png(&path, "TEST", &pts).expect("drawn");
        let bytes = std::fs::read(&path).expect("written");
        assert_eq!(bytes.get(1..4), Some(&b"PNG"[..]));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
