//! Markdown tables with targets: headers, cells and verdicts, as both benchmarks print them.

pub fn verdict(pass: bool) -> &'static str {
    if pass {
        "PASS"
    } else {
        "FAIL"
    }
}

pub fn join<T>(items: impl IntoIterator<Item = T>, f: impl Fn(T) -> String) -> String {
    items.into_iter().map(f).collect::<Vec<_>>().join(", ")
}

/// A table's title line, header row and separator.
pub fn table(title: &str, columns: &[&str]) {
    println!("\n### {title}\n");
    println!("| {} |", columns.join(" | "));
    println!("|{}", "---|".repeat(columns.len()));
}

/// Seconds with two decimals, `?` when unknown.
pub fn opt_secs(v: Option<f64>) -> String {
    v.map_or("?".into(), |s| format!("{s:.2}"))
}
