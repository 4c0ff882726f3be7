"""The embedded engine on a GPU against llama-server on the same GPU (#33).

Both built from the same pinned llama.cpp for the same backend (`make install
LLAMA_BACKEND=cuda` and `make llama-server`), both serving the same GGUF with every layer
offloaded and flash attention on: bench_concurrency.py at 1 and 8 streams (tokens/s, TTFT),
then bench_agents.py at 16 sessions on 8 slots (turns/s), each side by side in one run.
Targets (docs/benchmarks.md): 1 stream >= 0.95x, 8 streams >= 1.0x, agents >= 2x.

On a build without a GPU backend it says so and measures nothing.

    .venv/bin/python bench/bench_gpu.py --model qwen3-8b-q4_k_m.gguf [--threads 8]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from respond.engines.llamacpp._devices import devices

HERE = Path(__file__).resolve().parent
PLACEMENT = "-ngl 99 -fa on"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", type=Path, default=None, help="a GGUF (default: SmolLM2)")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--llama-server", type=Path, default=None)
    args = parser.parse_args()
    gpus = [d.name for d in devices() if d.offloads]
    if not gpus:
        print("bench_gpu: this build of llama.cpp has no GPU backend; nothing measured")
        print("  (on a GPU machine: make install LLAMA_BACKEND=cuda && make llama-server)")
        return
    print(f"bench_gpu: {', '.join(gpus)}, placement {PLACEMENT}")
    shared = ["--placement", PLACEMENT, "--threads", str(args.threads)]
    if args.model:
        shared += ["--model", str(args.model)]
    if args.llama_server:
        shared += ["--llama-server", str(args.llama_server)]
    runs = [
        ["bench_concurrency.py", "--concurrency", "1,8", "--chains", "0"],
        ["bench_agents.py", "--sessions", "16", "--parallel", "8", "--no-chains"],
    ]
    for script, *extra in runs:
        subprocess.run([sys.executable, str(HERE / script), *extra, *shared], check=True)


if __name__ == "__main__":
    main()
