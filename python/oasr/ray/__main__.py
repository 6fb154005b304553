"""``python -m oasr.ray serve CONFIG`` serves oasr-server's API on Ray Serve;
``python -m oasr.ray transcribe CONFIG MANIFEST OUTPUT`` transcribes a
manifest with Ray Data (the config's ``address`` and ``engine`` sections).
docs/ray.md explains the config file."""

from __future__ import annotations

import argparse
import json
import sys
from typing import List, Optional

from ..errors import Error


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m oasr.ray",
                                     description="oasr on a Ray cluster (docs/ray.md)")
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="serve the OpenAI transcription API on Ray Serve")
    serve.add_argument("config", help="the config file (YAML or JSON)")
    data = commands.add_parser("transcribe", help="transcribe a jsonl manifest with Ray Data")
    data.add_argument("config", help="the config file (its address and engine sections)")
    data.add_argument("manifest", help="jsonl lines with id and audio, as oasr eval reads")
    data.add_argument("output", help="jsonl output; ids already in it are skipped (resume)")
    data.add_argument("--concurrency", type=int, default=1, help="engines (actors), default 1")
    data.add_argument("--batch-size", type=int, default=None,
                      help="utterances an engine takes at once (default: its max_batch_size)")
    data.add_argument("--num-gpus", type=float, default=None,
                      help="GPUs per engine (default 1 for a CUDA engine, else 0)")
    data.add_argument("--num-cpus", type=float, default=1.0, help="cores per engine (default 1)")
    data.add_argument("--audio-root", default=None, help="folder the manifest's paths are under")
    data.add_argument("--parquet", default=None, help="also write the output as this Parquet file")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "serve":
            from .serve import run_serve

            run_serve(args.config)
            return 0
        from .config import load_config

        config = load_config(args.config)
        import ray

        from .data import transcribe_dataset

        ray.init(address=config["address"])
        counts = transcribe_dataset(args.manifest, args.output, config["engine"],
                                    concurrency=args.concurrency, batch_size=args.batch_size,
                                    num_gpus=args.num_gpus, num_cpus=args.num_cpus,
                                    audio_root=args.audio_root, parquet=args.parquet)
        print(json.dumps(counts))
        return 1 if counts["failed"] else 0
    except Error as e:
        sys.stderr.write(f"oasr.ray: error: {e}\n")
        return 2 if args.command == "serve" else 1


if __name__ == "__main__":
    sys.exit(main())
