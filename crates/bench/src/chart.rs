//! The report's chart: p50 and p99 latency of GET by id against connections, drawn with
//! plotters' SVG backend. SVG text is rendered by whatever displays the file, so neither the
//! build nor the run needs a font.

use std::path::Path;

use plotters::prelude::*;

/// One measured concurrency.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    pub connections: u32,
    pub p50_ms: f64,
    pub p99_ms: f64,
}

const W: u32 = 800;
const H: u32 = 500;
const P50: RGBColor = RGBColor(31, 119, 180);
const P99: RGBColor = RGBColor(214, 39, 40);
const GRID: RGBColor = RGBColor(225, 225, 225);
const INK: RGBColor = RGBColor(40, 40, 40);

fn err(e: impl std::fmt::Display) -> anyhow::Error {
    anyhow::anyhow!("drawing the chart: {e}")
}

/// A y-axis label: as many decimals as the axis's scale needs, the same on every label.
fn label(v: f64, top: f64) -> String {
    if top >= 20.0 {
        format!("{v:.0}")
    } else if top >= 2.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The connection count under category `x` (0, 1, …); nothing between two categories.
fn category(points: &[Point], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 {
        return String::new();
    }
    points
        .get(i as usize)
        .map(|p| p.connections.to_string())
        .unwrap_or_default()
}

/// The chart of `points` (in the order given, evenly spaced: connection counts are categories,
/// not a scale) as an SVG document.
pub fn latency_svg(title: &str, points: &[Point]) -> anyhow::Result<String> {
    anyhow::ensure!(!points.is_empty(), "no points to draw");
    let max_y = points
        .iter()
        .map(|p| p.p99_ms.max(p.p50_ms))
        .fold(0.0, f64::max);
    let top = (max_y * 1.15).max(0.01);
    let n = points.len() as f64;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 20).into_font().color(&INK))
            .margin(20)
            .x_label_area_size(50)
            .y_label_area_size(60)
            .build_cartesian_2d(-0.5f64..n - 0.5, 0f64..top)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(TRANSPARENT)
            .bold_line_style(GRID)
            .axis_style(INK)
            .x_labels(points.len())
            .x_label_formatter(&|x| category(points, *x))
            .y_label_formatter(&|v| label(*v, top))
            .x_desc("connections")
            .y_desc("ms")
            .label_style(("sans-serif", 15).into_font().color(&INK))
            .axis_desc_style(("sans-serif", 16).into_font().color(&INK))
            .draw()
            .map_err(err)?;
        for (name, color, pick) in [
            ("p50", P50, (|p: &Point| p.p50_ms) as fn(&Point) -> f64),
            ("p99", P99, |p: &Point| p.p99_ms),
        ] {
            let series: Vec<(f64, f64)> = (0..)
                .zip(points)
                .map(|(i, p)| (f64::from(i), pick(p)))
                .collect();
            chart
                .draw_series(LineSeries::new(series.clone(), color.stroke_width(3)))
                .map_err(err)?
                .label(name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 24, y)], color.stroke_width(3))
                });
            chart
                .draw_series(series.iter().map(|&c| Circle::new(c, 5, color.filled())))
                .map_err(err)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font(("sans-serif", 15).into_font().color(&INK))
            .background_style(WHITE.mix(0.9))
            .border_style(GRID)
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Writes the chart to `path`.
pub fn write_latency_svg(path: &Path, title: &str, points: &[Point]) -> anyhow::Result<()> {
    let svg = latency_svg(title, points)?;
    std::fs::write(path, svg).map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn points() -> Vec<Point> {
        [(1, 0.08, 0.21), (16, 0.26, 1.18), (64, 1.05, 3.35)]
            .into_iter()
            .map(|(connections, p50_ms, p99_ms)| Point {
                connections,
                p50_ms,
                p99_ms,
            })
            .collect()
    }

    #[test]
    fn labels_are_short() {
        assert_eq!(label(0.25, 1.2), "0.25");
        assert_eq!(label(1.0, 3.9), "1.0");
        assert_eq!(label(12.0, 40.0), "12");
        let pts = points();
        assert_eq!(category(&pts, 1.0), "16");
        assert_eq!(category(&pts, 0.5), "");
        assert_eq!(category(&pts, -0.5), "");
        assert_eq!(category(&pts, 3.0), "");
    }

    #[test]
    fn draws_both_series_with_their_text() {
        let svg = latency_svg("GET cluster by id", &points()).unwrap();
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // plotters writes each text on a line of its own inside <text>.
        for text in [
            "GET cluster by id",
            "connections",
            "ms",
            "p50",
            "p99",
            "1",
            "16",
            "64",
        ] {
            assert!(
                svg.contains(&format!(">\n{text}\n</text>")),
                "{text} missing"
            );
        }
        // One line per series, one marker per point and series.
        assert!(svg.matches("<polyline").count() >= 2);
        assert_eq!(svg.matches("<circle").count(), 6);
        assert!(latency_svg("x", &[]).is_err());
    }

    #[test]
    fn one_point_is_drawn_too() {
        let svg = latency_svg("x", &points()[..1]).unwrap();
        assert!(svg.contains(">\n1\n</text>"));
    }
}
