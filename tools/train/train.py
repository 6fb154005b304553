#!/usr/bin/env python3
"""Trains oasr's small U2++ English char model (8 kHz) on the GPU, resumable
across separate machine calls.

  python3 tools/train/train.py --data DATA_DIR --out RUN_DIR --max-minutes 8 \
      [--resume CKPT_DIR] [--export WENET_DIR]

DATA_DIR holds the jsonl manifests of tools/data (any *train*.jsonl is
training data; *dev*/*test*.jsonl are evaluated at the end). RUN_DIR gets
train.log, ckpt/ (safetensors shards <= 15 MiB, see checkpoint.py),
global_cmvn and eval.json. See README.md for the recipe and hyperparameters.
"""

import argparse
import json
import math
import os
import random
import sys
import time

T_START = time.time()

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from checkpoint import load_checkpoint, restore_optimizer, save_checkpoint  # noqa: E402
from data import AudioStore, BatchPlan, find_manifests, read_manifest, write_units  # noqa: E402
from features import (Augmenter, KaldiFbank, add_cmvn_stats, cmvn_from_stats,  # noqa: E402
                      cmvn_stats, spec_augment)
import matmul_conv  # noqa: E402
from model import ModelConfig, U2ppModel  # noqa: E402

MAX_PARAMS = 10_000_000  # stored in fp16 the model must stay <= 20 MB


class Log:

    def __init__(self, path):
        self.file = open(path, "a", buffering=1)

    def __call__(self, *parts):
        line = f"[{time.time() - T_START:7.1f}s] " + " ".join(str(p) for p in parts)
        print(line, flush=True)
        self.file.write(line + "\n")


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--data", required=True, help="folder with the jsonl manifests")
    p.add_argument("--out", required=True, help="run folder (log, checkpoint, eval)")
    p.add_argument("--max-minutes", type=float, default=8.0,
                   help="wall-clock budget of this call, startup and final eval included")
    p.add_argument("--reserve-minutes", type=float, default=1.5,
                   help="kept free at the end for saving, export and evaluation")
    p.add_argument("--resume", help="checkpoint folder to continue from")
    p.add_argument("--export", help="write a WeNet directory here at the end")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--threads", type=int, default=1,
                   help="CPU threads for a CPU run (more spin and slow down a shared machine)")
    # model (ignored on --resume: the checkpoint's config wins)
    p.add_argument("--d-model", type=int, default=256)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--blocks", type=int, default=6)
    p.add_argument("--linear-units", type=int, default=512)
    p.add_argument("--decoder-blocks", type=int, default=1)
    p.add_argument("--decoder-r-blocks", type=int, default=1)
    p.add_argument("--decoder-linear-units", type=int, default=512)
    p.add_argument("--dropout", type=float, default=0.1)
    # optimization
    p.add_argument("--batch-seconds", type=float, default=800.0,
                   help="padded audio seconds per batch")
    p.add_argument("--real-share", type=float, default=0.25,
                   help="share of each batch's audio drawn from real speech")
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--min-lr-ratio", type=float, default=0.03)
    p.add_argument("--warmup-steps", type=int, default=500)
    p.add_argument("--total-steps", type=int, default=0,
                   help="length of the cosine schedule, counted across resumed calls; 0: fit "
                        "it to this call (measured after --calibrate-steps steps), which on "
                        "--resume makes a warm restart of the cosine")
    p.add_argument("--calibrate-steps", type=int, default=100)
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--grad-clip", type=float, default=5.0)
    p.add_argument("--max-steps", type=int, default=0, help="stop after this many steps (0: time)")
    p.add_argument("--min-seconds", type=float, default=0.3, help="drop shorter utterances")
    p.add_argument("--max-seconds", type=float, default=20.0, help="drop longer utterances")
    p.add_argument("--no-augment", action="store_true")
    p.add_argument("--compile", action="store_true", help="torch.compile the model (torch 2.x)")
    p.add_argument("--save-optimizer", choices=["bf16", "fp32", "none"], default="bf16")
    p.add_argument("--save-every-minutes", type=float, default=4.0)
    p.add_argument("--log-every", type=int, default=50)
    p.add_argument("--profile-steps", type=int, default=0,
                   help="after 20 warm steps, time this many steps phase by phase (synchronized) "
                        "under torch.profiler and write RUN/profile.txt; training goes on after")
    p.add_argument("--eval", default="auto",
                   help="'auto': dev and test manifests of --data; 'none'; or a comma list")
    p.add_argument("--eval-modes", default="offline,chunk16")
    p.add_argument("--eval-max-utts", type=int, default=0, help="per manifest, 0: all")
    return p.parse_args()


def lr_at(step: int, args, total_steps: int) -> float:
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    if total_steps <= 0:  # not measured yet: hold the peak
        return args.lr
    progress = min(1.0, (step - args.warmup_steps) / max(1, total_steps - args.warmup_steps))
    floor = args.min_lr_ratio
    return args.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def check_fused_attention(model: U2ppModel, device, log) -> None:
    """On CUDA with torch >= 2.1 attention runs fused; compare it once with
    the plain matmul path (the one test_model.py checks against the oracle)."""
    import model as model_module
    if not (model_module._HAS_SDPA and str(device).startswith("cuda")):
        return
    model.eval()
    gen = torch.Generator().manual_seed(0)
    feats = (torch.randn(2, 300, 80, generator=gen) * 3).to(device)
    lens = torch.tensor([300, 211], device=device)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # compare in true fp32
    with torch.no_grad():
        model_module._HAS_SDPA = False
        plain = model.ctc_log_probs(feats, lens, 8)[1]
        model_module._HAS_SDPA = True
        try:
            fused = model.ctc_log_probs(feats, lens, 8)[1]
            diff = float((fused - plain)[0].abs().max())
        except RuntimeError as e:  # a torch build whose SDPA refuses these shapes
            diff, error = float("nan"), e
    torch.backends.cuda.matmul.allow_tf32 = tf32
    if diff < 1e-3:
        log(f"fused attention vs matmul path: max abs diff {diff:.2e}; using fused attention")
    else:
        model_module._HAS_SDPA = False
        log(f"fused attention disagrees or fails (diff {diff}); using the matmul path"
            + (f" ({error})" if diff != diff else ""))
    model.train()


class StepProfiler:
    """Where a training step's time goes: `steps` steps after `start_step`,
    each phase timed between device synchronizations, the same steps under
    torch.profiler (top operators by device and host time). Off (no
    synchronization at all) when steps is 0."""

    def __init__(self, steps, start_step, cuda, path, log):
        self.steps, self.start, self.cuda, self.path, self.log = steps, start_step, cuda, path, log
        self.active = False
        self.done = 0
        self.totals = {}
        self.shapes = []
        self.torch_profiler = None

    def _sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def begin_step(self, step):
        if self.steps <= 0 or self.done >= self.steps or step < self.start:
            self.active = False
            return
        if self.torch_profiler is None:
            activities = [torch.profiler.ProfilerActivity.CPU]
            if self.cuda:
                activities.append(torch.profiler.ProfilerActivity.CUDA)
            self.torch_profiler = torch.profiler.profile(activities=activities)
            self.torch_profiler.start()
        self.active = True
        self._sync()
        self.t_step = self.t_phase = time.perf_counter()

    def phase(self, name):
        if not self.active:
            return
        self._sync()
        now = time.perf_counter()
        self.totals[name] = self.totals.get(name, 0.0) + now - self.t_phase
        self.t_phase = now

    def end_step(self, shape):
        if not self.active:
            return
        self.totals["step"] = self.totals.get("step", 0.0) + time.perf_counter() - self.t_step
        self.shapes.append(tuple(shape))
        self.done += 1
        self.active = False
        if self.done == self.steps:
            self.torch_profiler.stop()
            lines = [f"{self.done} steps, feature shapes {self.shapes[:5]} ...",
                     "ms per step by phase (synchronized):"]
            lines += [f"  {k:14s} {1000 * v / self.done:8.1f}" for k, v in self.totals.items()]
            averages = self.torch_profiler.key_averages()
            sort = "self_cuda_time_total" if self.cuda else "self_cpu_time_total"
            lines.append(averages.table(sort_by=sort, row_limit=40))
            lines.append(averages.table(sort_by="self_cpu_time_total", row_limit=25))
            with open(self.path, "w") as f:
                f.write("\n".join(lines) + "\n")
            for line in lines[:2 + len(self.totals)]:
                self.log(line)


def filter_entries(entries, args, log):
    keep = []
    for e in entries:
        d = e.get("duration")
        if d is not None and not (args.min_seconds <= float(d) <= args.max_seconds):
            continue
        keep.append(e)
    if len(keep) != len(entries):
        log(f"duration filter [{args.min_seconds}, {args.max_seconds}] s: "
            f"kept {len(keep)} of {len(entries)}")
    return keep


def compute_cmvn(store: AudioStore, fbank: KaldiFbank, device, log, max_utts=6000):
    """Global CMVN from clean (unaugmented, undithered) training features."""
    rng = random.Random(0)
    pool = list(range(len(store.entries)))
    rng.shuffle(pool)
    pool = sorted(pool[:max_utts], key=lambda i: int(store.lengths_cpu[i]))
    stats = None
    for start in range(0, len(pool), 128):
        idx = torch.tensor(pool[start:start + 128])
        wave, lengths, _, _, _ = store.gather(idx)
        feats, counts = fbank(wave, lengths)
        stats = add_cmvn_stats(stats, cmvn_stats(feats, counts))
    log(f"CMVN from {len(pool)} clean utterances, {stats['frame_num']} frames")
    return stats


def main():
    args = parse_args()
    os.makedirs(args.out, exist_ok=True)
    log = Log(os.path.join(args.out, "train.log"))
    log("args:", json.dumps(vars(args)))
    log(f"torch {torch.__version__}, device {args.device}")
    device = torch.device(args.device)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    cuda = device.type == "cuda"
    if cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
        torch.backends.cudnn.benchmark = False
        # cuDNN's fused attention builds an execution plan for every new
        # sequence length, on the host: with duration-bucketed batches (a new
        # length nearly every step) that cost 340 ms of CPU per step against
        # 43 ms of GPU work (--profile-steps on the H200, torch 2.11). The
        # flash / memory-efficient kernels need no plan.
        if hasattr(torch.backends.cuda, "enable_cudnn_sdp"):
            torch.backends.cuda.enable_cudnn_sdp(False)
    else:
        torch.set_num_threads(args.threads)

    meta, state, moments = ({}, None, {})
    if args.resume:
        meta, state, moments = load_checkpoint(args.resume)
        cfg = ModelConfig(**meta["config"])
        log(f"resuming from {args.resume}: step {meta['step']}, "
            f"optimizer state {'yes' if moments else 'no'}")
    else:
        cfg = ModelConfig(output_size=args.d_model, attention_heads=args.heads,
                          num_blocks=args.blocks, linear_units=args.linear_units,
                          decoder_num_blocks=args.decoder_blocks,
                          decoder_r_num_blocks=args.decoder_r_blocks,
                          decoder_linear_units=args.decoder_linear_units,
                          dropout_rate=args.dropout, positional_dropout_rate=args.dropout,
                          attention_dropout_rate=args.dropout)
    model = U2ppModel(cfg)
    count = model.num_parameters()
    log(f"model: {count:,} parameters ({count * 2 / 1e6:.1f} MB in fp16)")
    if count > MAX_PARAMS:
        raise SystemExit(f"refusing a model of {count:,} parameters: the budget is "
                         f"{MAX_PARAMS:,} (<= 20 MB in fp16); reduce --linear-units or --blocks")

    # Data: every training utterance once, at 8 kHz, in device memory.
    manifests = find_manifests(args.data, "train")
    if not manifests:
        raise SystemExit(f"no *train*.jsonl manifest under {args.data}")
    entries = []
    for m in manifests:
        part = read_manifest(m)
        log(f"manifest {m}: {len(part)} utterances "
            f"({sum(1 for e in part if 'voice' in e)} synthetic)")
        entries += part
    entries = filter_entries(entries, args, log)
    store = AudioStore(entries, device, log=log)
    real_seconds = float(store.lengths_cpu[~store.synthetic.cpu()].sum()) / 8000
    log(f"audio loaded: {len(entries)} utterances, {store.seconds / 3600:.2f} h "
        f"({real_seconds / 3600:.2f} h real); {store.audio.numel() * 4 / 2**30:.2f} GiB on device")
    fbank = KaldiFbank(device=device)

    if state is not None:
        model.load_state_dict(state, strict=True)
        stats = meta["cmvn"]
    else:
        stats = compute_cmvn(store, fbank, device, log)
        mean, istd = cmvn_from_stats(stats)
        model.encoder.global_cmvn.mean.copy_(mean)
        model.encoder.global_cmvn.istd.copy_(istd)
    with open(os.path.join(args.out, "global_cmvn"), "w") as f:
        json.dump(stats, f)
    write_units(os.path.join(args.out, "units.txt"))
    model.to(device)
    if device.type == "cuda":
        # cuDNN plans a convolution per new input shape; every batch has one.
        log(f"convolutions as unfold + matmul: {matmul_conv.install(model)} modules")
    check_fused_attention(model, device, log)
    model.train()
    cmvn_mean = model.encoder.global_cmvn.mean.detach().clone()

    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.dim() == 1 or n.endswith(("pos_bias_u", "pos_bias_v")) else decay).append(p)
    groups = [{"params": decay, "weight_decay": args.weight_decay},
              {"params": no_decay, "weight_decay": 0.0}]
    opt_kwargs = dict(lr=args.lr, betas=(0.9, 0.98), eps=1e-9)
    try:  # fused AdamW: one kernel for all parameters (torch >= 2.0 on CUDA)
        optimizer = torch.optim.AdamW(groups, fused=True, **opt_kwargs) if cuda else None
    except (TypeError, RuntimeError):
        optimizer = None
    if optimizer is None:
        optimizer = torch.optim.AdamW(groups, **opt_kwargs)
    if moments:
        log(f"restored optimizer state for {restore_optimizer(optimizer, model, moments)} tensors")
    forward = torch.compile(model, dynamic=True) if args.compile else model

    step = int(meta.get("step", 0))
    epoch = int(meta.get("epoch", 0))
    batch_in_epoch = int(meta.get("batch_in_epoch", 0))
    trained_seconds = float(meta.get("trained_seconds", 0.0))
    audio_seconds_seen = float(meta.get("audio_seconds_seen", 0.0))
    torch.manual_seed(args.seed + step)  # fresh, reproducible randomness per call
    plan = BatchPlan(store.lengths_cpu, store.synthetic, args.batch_seconds, args.real_share,
                     args.seed)
    augment = Augmenter(device)
    deadline = T_START + 60 * (args.max_minutes - args.reserve_minutes)
    last_save = time.time()
    first_step = step
    total_steps = args.total_steps
    if total_steps <= 0 and step > 0:
        total_steps = 2 * step  # until measured: assume this call is as long as the last
    t_calibrate = None
    log(f"training from step {step}, epoch {epoch}; {(deadline - time.time()) / 60:.1f} "
        f"minutes for steps")

    def save():
        save_checkpoint(os.path.join(args.out, "ckpt"), model, optimizer, {
            "step": step, "epoch": epoch, "batch_in_epoch": batch_in_epoch,
            "config": cfg.to_dict(), "cmvn": stats, "trained_seconds": trained_seconds,
            "audio_seconds_seen": audio_seconds_seen, "total_steps": total_steps,
            "args": vars(args),
        }, args.save_optimizer)

    profiler = StepProfiler(args.profile_steps, first_step + 20, cuda,
                            os.path.join(args.out, "profile.txt"), log)
    # The steps/s that fits the cosine is measured after the first (slow)
    # steps and after any profiled ones, whose synchronizations slow them.
    calibrate_from = 10 + (20 + args.profile_steps if args.profile_steps > 0 else 0)
    window = {"loss": 0.0, "ctc": 0.0, "att": 0.0, "acc": 0.0, "n": 0, "audio": 0.0}
    sums = None
    t_window = time.time()
    stop = False
    while not stop:
        batches = plan.epoch(epoch)
        while batch_in_epoch < len(batches):
            if time.time() > deadline or (args.max_steps and step >= args.max_steps):
                stop = True
                break
            t0 = time.time()
            profiler.begin_step(step)
            idx = torch.tensor(batches[batch_in_epoch])
            batch_in_epoch += 1
            wave, lengths, tokens, token_lens, synthetic = store.gather(idx)
            profiler.phase("gather")
            with torch.no_grad():
                if not args.no_augment:
                    wave, lengths = augment(wave, lengths, synthetic)
                profiler.phase("augment")
                feats, counts = fbank(wave, lengths, dither=1.0)
                profiler.phase("fbank")
                if not args.no_augment:
                    feats = spec_augment(feats, counts, cmvn_mean)
                profiler.phase("spec_augment")
            for g in optimizer.param_groups:
                g["lr"] = lr_at(step, args, total_steps)
            chunk = model.sample_chunk_size()
            if cuda:
                with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
                    loss, parts = forward(feats, counts, tokens, token_lens, chunk)
            else:
                loss, parts = forward(feats, counts, tokens, token_lens, chunk)
            profiler.phase("forward")
            loss.backward()
            profiler.phase("backward")
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), args.grad_clip)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            profiler.phase("optimizer")
            profiler.end_step(feats.shape)
            step += 1
            if args.total_steps <= 0 and step - first_step == calibrate_from:
                if cuda:
                    torch.cuda.synchronize()
                t_calibrate = time.time()  # after the first (slow) steps
            if args.total_steps <= 0 and step - first_step == calibrate_from + args.calibrate_steps:
                if cuda:
                    torch.cuda.synchronize()
                rate = args.calibrate_steps / (time.time() - t_calibrate)
                total_steps = step + int(rate * max(0.0, deadline - time.time()))
                log(f"measured {rate:.2f} steps/s: cosine schedule over {total_steps} steps")
            part = torch.stack([loss.detach().float(), parts["ctc"].float(), parts["att"].float(),
                                parts["acc"].float(), grad_norm.float()])
            sums = part if sums is None else sums + part
            window["n"] += 1
            window["audio"] += float(store.lengths_cpu[idx].sum()) / 8000
            trained_seconds += time.time() - t0
            if step % args.log_every == 0:
                values = (sums / window["n"]).tolist()
                elapsed = time.time() - t_window
                audio_seconds_seen += window["audio"]
                log(f"step {step} epoch {epoch} loss {values[0]:.3f} ctc {values[1]:.3f} "
                    f"att {values[2]:.3f} acc {values[3]:.3f} gnorm {values[4]:.2f} "
                    f"lr {lr_at(step, args, total_steps):.2e} | "
                    f"{window['n'] / elapsed:.2f} steps/s, "
                    f"{window['audio'] / elapsed:.0f} s audio/s")
                if not math.isfinite(values[0]):
                    raise SystemExit("loss is not finite; lower --lr or check the data")
                sums, window = None, {"n": 0, "audio": 0.0}
                t_window = time.time()
            if time.time() - last_save > 60 * args.save_every_minutes:
                save()
                last_save = time.time()
        if not stop:
            epoch += 1
            batch_in_epoch = 0
    if window["n"]:
        audio_seconds_seen += window["audio"]
    save()
    log(f"saved checkpoint at step {step} ({audio_seconds_seen / 3600:.1f} h of audio seen)")
    model.eval()
    if args.export:
        from export_wenet import export
        export(model, stats, args.export)
        log(f"exported WeNet directory {args.export}")
    if args.eval != "none":
        from evaluate import evaluate_manifest
        if args.eval == "auto":
            targets = find_manifests(args.data, "dev") + find_manifests(args.data, "test")
        else:
            targets = args.eval.split(",")
        report = {"step": step}
        for m in targets:
            report[os.path.basename(m)] = evaluate_manifest(
                model, m, device, args.eval_modes.split(","), max_utts=args.eval_max_utts,
                log=log)
        with open(os.path.join(args.out, "eval.json"), "w") as f:
            json.dump(report, f, indent=1)
    log(f"done in {(time.time() - T_START) / 60:.1f} minutes")


if __name__ == "__main__":
    main()
