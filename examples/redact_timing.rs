//! Times the 2026.9 history redactor on a 4,000-character block and an 80 KB page (a printout,
//! not a test): `cargo run --release --example redact_timing`.

use std::time::Instant;

use session_tools::tools::v2026_9::redact::redact;

fn page(len: usize, with_secrets: bool) -> String {
    let prose = "The deploy ran at 12:04; see https://example.com/runs/77?tab=logs for the output. ";
    let secrets = "export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuvwxyz0123 and ghp_1234567890abcdefghijABCDEFGHIJ12 ";
    let mut s = String::with_capacity(len + 200);
    let mut n = 0;
    while s.len() < len {
        s.push_str(if with_secrets && n % 8 == 7 { secrets } else { prose });
        n += 1;
    }
    s.truncate(len);
    s
}

fn time(label: &str, text: &str) {
    let runs = if text.len() > 10_000 { 50 } else { 500 };
    let _ = redact(text, &[]);
    let t = Instant::now();
    for _ in 0..runs {
        std::hint::black_box(redact(std::hint::black_box(text), &[]));
    }
    let per = t.elapsed().as_secs_f64() * 1e6 / runs as f64;
    println!("{label:<28} {:>7} chars  {per:>9.1} µs/call", text.len());
}

fn main() {
    time("4,000 chars, prose", &page(4_000, false));
    time("4,000 chars, with secrets", &page(4_000, true));
    time("80 KB, prose", &page(80_000, false));
    time("80 KB, with secrets", &page(80_000, true));
}
