"""Peak memory and time of one range query answered by 10,000 series, with and without the cap.

A local HTTP server (in this process) answers every range query with the same reply: 10,000
series of 241 samples (two hours at 30 s, a diagnosis' window), in the Prometheus API's
shape, about 69 MB of JSON. Each case runs in a fresh process that fetches it through
`PrometheusSource.range_queries` and places the series on the round's grid
(`signals.live.frame_from_results`), as a diagnosis does; it reports its peak resident
memory (`VmHWM` of /proc/self/status), the resident memory before the fetch (imports
done), and the wall time of the fetch and placement.

Cases: the reply parsed whole (orjson, as every reply was before replies past
`STREAMED_REPLY_BYTES` were parsed series by series) or series by series; series by series,
each series read in Prometheus's own form (`signals.prometheus.canonical`, the default) or
parsed as JSON as any other form is; the cap off (`max_series=0`) or at its default (2,000).

Run: python -m bench.series_cap [--runs 3] [--series 10000] [--samples 241]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.procstat import status_mb

ROOT = Path(__file__).resolve().parent.parent
START = 1_760_000_000.0
STEP = 30.0
CASES = {
    "parsed whole, no cap": ("whole", 0),
    "parsed whole, cap 2000": ("whole", 2000),
    "series by series, parsed as JSON, no cap": ("json", 0),
    "series by series, no cap": ("streamed", 0),
    "series by series, cap 2000 (default)": ("streamed", 2000),
}


def reply(series: int, samples: int) -> bytes:
    """`series` replicas' series of `samples` values each, in the shuffled order a server may use."""
    parts = []
    for i in range(series):
        j = (i * 7919) % series
        metric = json.dumps({"__name__": "vllm:kv_cache_usage_perc", "job": "vllm", "pod": f"vllm-{j:05d}"})
        values = ",".join(
            f'[{START + STEP * k:.0f},"{0.5 + (j % 97) / 1000 + k / 1e5:.6f}"]' for k in range(samples)
        )
        parts.append(f'{{"metric":{metric},"values":[{values}]}}')
    return ('{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(parts) + "]}}").encode()


def serve(body: bytes) -> ThreadingHTTPServer:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def child(url: str, parse: str, max_series: int, samples: int) -> None:
    """One fetch in this fresh process; prints its figures as one JSON object."""
    import numpy as np

    from signals.live import frame_from_results
    from signals.prometheus import PrometheusSource, replies

    if parse == "whole":
        replies.STREAMED_REPLY_BYTES = 1 << 62
    if parse == "json":
        from signals.prometheus import streamed

        vars(streamed)["canonical_series"] = lambda piece, reply: None
    end = START + STEP * (samples - 1)
    grid = np.arange(START, end + STEP / 2, STEP)
    before = status_mb("VmRSS")
    started = time.perf_counter()
    with PrometheusSource(url, timeout=300, max_series=max_series) as source:
        results = source.range_queries({"kv_usage_ratio/replica": "q"}, START, end, STEP)
    frame, _ = frame_from_results(results, grid, STEP, "pod", url)
    took = time.perf_counter() - started
    result = results["kv_usage_ratio/replica"]
    assert result.ok, result.error
    print(
        json.dumps(
            {
                "before_mb": before,
                "peak_mb": status_mb("VmHWM"),
                "seconds": took,
                "series": len(frame.rows("kv_usage_ratio")),
                "warnings": result.warnings,
            }
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per case (default 3)")
    parser.add_argument("--series", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=241)
    parser.add_argument("--child", nargs=3, metavar=("URL", "PARSE", "MAX_SERIES"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        url, parse, cap = args.child
        child(url, parse, int(cap), args.samples)
        return 0
    body = reply(args.series, args.samples)
    server = serve(body)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    print(f"one reply: {args.series} series x {args.samples} samples, {len(body) / 1e6:.1f} MB of JSON")
    print(f"{'case':<42} {'series kept':>11} {'RSS before':>10} {'peak RSS':>9} {'time':>7}")
    for name, (parse, cap) in CASES.items():
        runs = []
        for _ in range(args.runs):
            out = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "bench.series_cap",
                    "--samples",
                    str(args.samples),
                    "--child",
                    url,
                    parse,
                    str(cap),
                ],
                cwd=ROOT,
                capture_output=True,
                check=True,
                text=True,
            )
            runs.append(json.loads(out.stdout))
        peak = statistics.median(r["peak_mb"] for r in runs)
        before = statistics.median(r["before_mb"] for r in runs)
        seconds = statistics.median(r["seconds"] for r in runs)
        print(f"{name:<42} {runs[0]['series']:>11} {before:>8.0f}MB {peak:>7.0f}MB {seconds:>6.2f}s")
        for warning in runs[0]["warnings"]:
            print(f"{'':<42} warning: {warning}")
    server.shutdown()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
