"""The audio list `oasr bench whisper` hands its peer scripts: one
"utterance_id<TAB>path" per line (bench/faster_whisper_bench.py,
bench/transformers_whisper_bench.py)."""
import sys


def read_audio_list(path):
    """[(utterance_id, path), ...] in file order; exits 2 naming the first bad line."""
    items = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.rstrip("\n")
            if not line:
                continue
            parts = line.split("\t")
            if len(parts) != 2:
                print(f"{path}:{number}: expected 'id<TAB>path'", file=sys.stderr)
                sys.exit(2)
            items.append(parts)
    return items
