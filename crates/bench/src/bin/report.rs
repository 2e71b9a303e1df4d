//! `bench-report`: writes docs/benchmarks.md and its latency chart from the raw output of one
//! `make bench` run. `bench-report --raw DIR --out FILE.md --chart FILE.png --chart-link REL`

use std::path::Path;

use bench::args::Args;

fn main() -> anyhow::Result<()> {
    let args = Args::from_env()?;
    let raw = args.required("raw")?;
    let out = args.required("out")?;
    let chart = args.required("chart")?;
    let link = args.or("chart-link", "benchmarks/latency.png".to_owned())?;
    let rendered = bench::report::render(Path::new(&raw), &link)?;
    bench::chart::latency_png(
        Path::new(&chart),
        "GET CLUSTER BY ID: LATENCY AGAINST CONNECTIONS",
        &rendered.chart,
    )?;
    std::fs::write(&out, &rendered.markdown)?;
    print!("{}", rendered.markdown);
    Ok(())
}
