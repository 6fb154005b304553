"""Independent PyTorch model of WeNet's U2++ Conformer (oracle for oasr).

Written from WeNet's published architecture (wenet/transformer/*.py at the
revision before the Sept 2025 move to wenet/models/, read for semantics only).
Module attribute names are chosen so that `state_dict()` keys and shapes are
exactly those of a WeNet ASRModel with a ConformerEncoder, a
BiTransformerDecoder and a CTC head, so a WeNet `final.pt` loads strictly.

Inference only: dropout is never applied, BatchNorm uses running statistics.

Semantics kept from WeNet (each one matters for bit-level agreement):
  * Relative positional attention WITHOUT rel_shift: the positional term of
    query i and key j is (q_i + pos_bias_v) . linear_pos(pe[abs pos of j]),
    independent of i. The input of the encoder layers is x * sqrt(d); the
    sinusoid table is not added to x (it only feeds linear_pos).
  * Masked attention: scores of masked keys are set to -inf, softmax, then the
    masked probabilities are set to 0 (a fully masked row gives zeros, not NaN).
  * Conformer layer (normalize_before): x += 0.5*FFmac(LN(x)); x += MHSA(LN(x));
    x += Conv(LN(x)); x += 0.5*FF(LN(x)); x = LN_final(x). Without the macaron
    FFN the FFN scale is 1.0.
  * Conv module: pointwise_conv1 (C -> 2C) -> GLU over channels -> depthwise
    conv (causal: left zero pad kernel-1, or the CNN cache) -> LayerNorm over
    channels or BatchNorm -> activation -> pointwise_conv2. Padded frames are
    zeroed before pointwise_conv1 and after pointwise_conv2.
  * Streaming (forward_chunk): the KV cache holds the keys/values of earlier
    frames of each layer; the positional table used for the keys starts at
    offset - cache_len; no attention mask; the CNN cache is the last
    kernel-1 frames of the conv module input (after norm_conv).
"""

import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn.functional as F
from torch import nn

# ---- configuration -------------------------------------------------------------

SUPPORTED_INPUT_LAYERS = ("conv2d", "conv2d6", "conv2d8")


@dataclass
class U2ppConfig:
    """The U2++ hyper-parameters, named as in WeNet's train.yaml."""

    input_dim: int = 80
    vocab_size: int = 60
    # encoder_conf
    output_size: int = 256
    attention_heads: int = 4
    linear_units: int = 2048
    num_blocks: int = 12
    input_layer: str = "conv2d"
    pos_enc_layer_type: str = "rel_pos"
    selfattention_layer_type: str = "rel_selfattn"
    normalize_before: bool = True
    macaron_style: bool = True
    use_cnn_module: bool = True
    cnn_module_kernel: int = 15
    causal: bool = True
    cnn_module_norm: str = "layer_norm"
    activation_type: str = "swish"
    use_dynamic_chunk: bool = True
    static_chunk_size: int = 0
    # decoder_conf (BiTransformerDecoder)
    decoder_heads: int = 4
    decoder_linear_units: int = 2048
    decoder_num_blocks: int = 3
    decoder_r_num_blocks: int = 3
    decoder_activation_type: str = "relu"
    # model_conf
    ctc_weight: float = 0.3
    reverse_weight: float = 0.3
    # special symbols; WeNet: sos = eos = vocab_size - 1 unless
    # tokenizer_conf.special_tokens names them
    sos: int = -1
    eos: int = -1
    ignore_id: int = -1
    blank_id: int = 0
    # length of the sinusoid tables (WeNet's max_len)
    pos_table_len: int = 5000
    # WeNet >= March 2024 stores the sinusoid tables as `...pe` buffers in the
    # state dict; earlier checkpoints do not have them.
    persistent_pos_tables: bool = True

    def __post_init__(self):
        if self.sos < 0:
            self.sos = self.vocab_size - 1
        if self.eos < 0:
            self.eos = self.vocab_size - 1
        self.validate()

    def validate(self):
        def refuse(key, value, allowed):
            if value not in allowed:
                raise ValueError(f"U2++ oracle: {key}={value!r} is not supported "
                                 f"(supported: {list(allowed)})")

        refuse("input_layer", self.input_layer, SUPPORTED_INPUT_LAYERS)
        refuse("pos_enc_layer_type", self.pos_enc_layer_type, ("rel_pos",))
        refuse("selfattention_layer_type", self.selfattention_layer_type,
               ("rel_selfattn",))
        refuse("cnn_module_norm", self.cnn_module_norm, ("layer_norm", "batch_norm"))
        refuse("activation_type", self.activation_type, ("swish", "relu"))
        refuse("decoder activation_type", self.decoder_activation_type,
               ("relu", "swish"))
        if self.output_size % self.attention_heads:
            raise ValueError("output_size must be a multiple of attention_heads")
        if not self.causal and (self.cnn_module_kernel - 1) % 2:
            raise ValueError("a non-causal conv module needs an odd kernel")

    @staticmethod
    def from_train_yaml(conf: dict) -> "U2ppConfig":
        """Reads a WeNet train.yaml dict (v3 or v2 layout)."""
        if conf.get("encoder", "conformer") != "conformer":
            raise ValueError(f"encoder {conf.get('encoder')!r} is not a conformer")
        if conf.get("decoder", "bitransformer") != "bitransformer":
            raise ValueError(f"decoder {conf.get('decoder')!r} is not bitransformer")
        enc = conf["encoder_conf"]
        dec = conf["decoder_conf"]
        model = conf.get("model_conf", {})
        vocab = int(conf.get("output_dim", conf.get("vocab_size")))
        special = (conf.get("tokenizer_conf") or {}).get("special_tokens") or {}
        return U2ppConfig(
            input_dim=int(conf["input_dim"]),
            vocab_size=vocab,
            output_size=enc.get("output_size", 256),
            attention_heads=enc.get("attention_heads", 4),
            linear_units=enc.get("linear_units", 2048),
            num_blocks=enc.get("num_blocks", 6),
            input_layer=enc.get("input_layer", "conv2d"),
            pos_enc_layer_type=enc.get("pos_enc_layer_type", "rel_pos"),
            selfattention_layer_type=enc.get("selfattention_layer_type",
                                             "rel_selfattn"),
            normalize_before=enc.get("normalize_before", True),
            macaron_style=enc.get("macaron_style", True),
            use_cnn_module=enc.get("use_cnn_module", True),
            cnn_module_kernel=enc.get("cnn_module_kernel", 15),
            causal=enc.get("causal", False),
            cnn_module_norm=enc.get("cnn_module_norm", "batch_norm"),
            activation_type=enc.get("activation_type", "swish"),
            use_dynamic_chunk=enc.get("use_dynamic_chunk", False),
            static_chunk_size=enc.get("static_chunk_size", 0),
            decoder_heads=dec.get("attention_heads", 4),
            decoder_linear_units=dec.get("linear_units", 2048),
            decoder_num_blocks=dec.get("num_blocks", 6),
            decoder_r_num_blocks=dec.get("r_num_blocks", 0),
            decoder_activation_type=dec.get("activation_type", "relu"),
            ctc_weight=model.get("ctc_weight", 0.5),
            reverse_weight=model.get("reverse_weight", 0.0),
            sos=int(special.get("<sos>", vocab - 1)),
            eos=int(special.get("<eos>", vocab - 1)),
            blank_id=int((conf.get("ctc_conf") or {}).get("ctc_blank_id", 0)),
        )


def make_activation(name: str) -> nn.Module:
    return nn.SiLU() if name == "swish" else nn.ReLU()


# ---- small building blocks ----------------------------------------------------------


def sinusoid_table(length: int, dim: int) -> torch.Tensor:
    """(1, length, dim): even channels sin(p * w_k), odd channels cos(p * w_k),
    w_k = exp(-(2k) * ln(10000) / dim), computed in fp32 as WeNet does."""
    pos = torch.arange(0, length, dtype=torch.float32).unsqueeze(1)
    freq = torch.exp(
        torch.arange(0, dim, 2, dtype=torch.float32) * -(math.log(10000.0) / dim))
    table = torch.zeros(length, dim)
    table[:, 0::2] = torch.sin(pos * freq)
    table[:, 1::2] = torch.cos(pos * freq)
    return table.unsqueeze(0)


class SinusoidTable(nn.Module):
    """Holds WeNet's `pe` buffer. `scale_and_add` is the absolute encoding of
    the decoder (x*sqrt(d) + pe); the encoder only scales and reads the table."""

    def __init__(self, dim: int, length: int, persistent: bool):
        super().__init__()
        self.xscale = math.sqrt(dim)
        self.register_buffer("pe", sinusoid_table(length, dim), persistent=persistent)

    def rows(self, start: int, count: int) -> torch.Tensor:
        if start < 0 or start + count > self.pe.size(1):
            raise ValueError(f"positions [{start}, {start + count}) exceed the table")
        return self.pe[:, start:start + count]

    def scale_and_add(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.xscale + self.rows(0, x.size(1))


class GlobalCMVN(nn.Module):

    def __init__(self, dim: int):
        super().__init__()
        self.register_buffer("mean", torch.zeros(dim))
        self.register_buffer("istd", torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) * self.istd


class ConvSubsampling(nn.Module):
    """WeNet's Conv2dSubsampling4/6/8: stacked stride-2/3 Conv2d + ReLU over
    (time, mel) with no padding, then a Linear over (channels x freq)."""

    # input_layer -> [(kernel, stride)], right context, name of the projection
    LAYOUTS = {
        "conv2d": ([(3, 2), (3, 2)], 6, "out"),
        "conv2d6": ([(3, 2), (5, 3)], 10, "linear"),
        "conv2d8": ([(3, 2), (3, 2), (3, 2)], 14, "linear"),
    }

    def __init__(self, kind: str, idim: int, odim: int, pos_table: SinusoidTable):
        super().__init__()
        convs, self.right_context, proj_name = self.LAYOUTS[kind]
        layers: List[nn.Module] = []
        freq = idim
        channels = 1
        self.rate = 1
        for kernel, stride in convs:
            layers += [nn.Conv2d(channels, odim, kernel, stride), nn.ReLU()]
            channels = odim
            freq = (freq - kernel) // stride + 1
            self.rate *= stride
        self.conv = nn.Sequential(*layers)
        self.convs = convs
        proj = nn.Linear(odim * freq, odim)
        # conv2d keeps the Linear inside a Sequential named `out`.
        if proj_name == "out":
            self.out = nn.Sequential(proj)
        else:
            self.linear = proj
        self.pos_enc = pos_table

    def proj_module(self) -> nn.Linear:
        return self.out[0] if hasattr(self, "out") else self.linear

    def proj(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj_module()(x)

    def output_length(self, frames: int) -> int:
        for kernel, stride in self.convs:
            frames = (frames - kernel) // stride + 1 if frames >= kernel else 0
        return frames

    def forward(self, x: torch.Tensor, lengths: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """x (B, T, idim) -> (B, T', odim) scaled by sqrt(d); lengths -> T'."""
        y = self.conv(x.unsqueeze(1))
        b, c, t, f = y.shape
        y = self.proj(y.transpose(1, 2).reshape(b, t, c * f))
        out_lens = torch.tensor([self.output_length(int(n)) for n in lengths])
        return y * self.pos_enc.xscale, out_lens


class MultiHeadAttention(nn.Module):
    """Scaled dot-product attention with WeNet's linear_{q,k,v,out} names."""

    def __init__(self, heads: int, dim: int):
        super().__init__()
        self.heads = heads
        self.d_k = dim // heads
        self.linear_q = nn.Linear(dim, dim)
        self.linear_k = nn.Linear(dim, dim)
        self.linear_v = nn.Linear(dim, dim)
        self.linear_out = nn.Linear(dim, dim)

    def split_heads(self, x: torch.Tensor) -> torch.Tensor:  # (B,T,D)->(B,H,T,dk)
        return x.view(x.size(0), x.size(1), self.heads, self.d_k).transpose(1, 2)

    def attend(self, scores: torch.Tensor, v: torch.Tensor,
               allowed: Optional[torch.Tensor]) -> torch.Tensor:
        """scores (B,H,T1,T2); allowed bool (B,T1|1,T2) or None."""
        if allowed is not None:
            blocked = ~allowed.unsqueeze(1)
            scores = scores.masked_fill(blocked, -float("inf"))
            probs = torch.softmax(scores, dim=-1).masked_fill(blocked, 0.0)
        else:
            probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).transpose(1, 2)
        return self.linear_out(ctx.reshape(ctx.size(0), ctx.size(1), -1))

    def forward(self, query, key, value, allowed):
        q = self.split_heads(self.linear_q(query))
        k = self.split_heads(self.linear_k(key))
        v = self.split_heads(self.linear_v(value))
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(self.d_k)
        return self.attend(scores, v, allowed)


class RelPositionAttention(MultiHeadAttention):
    """Transformer-XL style attention as WeNet uses it (no rel_shift)."""

    def __init__(self, heads: int, dim: int):
        super().__init__(heads, dim)
        self.linear_pos = nn.Linear(dim, dim, bias=False)
        self.pos_bias_u = nn.Parameter(torch.zeros(heads, self.d_k))
        self.pos_bias_v = nn.Parameter(torch.zeros(heads, self.d_k))

    def forward(self, x: torch.Tensor, allowed: Optional[torch.Tensor],
                key_positions: torch.Tensor,
                cache: Optional[Tuple[torch.Tensor, torch.Tensor]] = None):
        """x (B,T,D); key_positions: sinusoid rows of the keys (1,Tk,D), where
        Tk = cached frames + T. Returns output and the (k, v) of all keys."""
        q = self.linear_q(x).view(x.size(0), x.size(1), self.heads, self.d_k)
        k = self.split_heads(self.linear_k(x))
        v = self.split_heads(self.linear_v(x))
        if cache is not None and cache[0].size(2) > 0:
            k = torch.cat([cache[0], k], dim=2)
            v = torch.cat([cache[1], v], dim=2)
        p = self.split_heads(self.linear_pos(key_positions))  # (1,H,Tk,dk)
        q_u = (q + self.pos_bias_u).transpose(1, 2)
        q_v = (q + self.pos_bias_v).transpose(1, 2)
        content = torch.matmul(q_u, k.transpose(-2, -1))
        position = torch.matmul(q_v, p.transpose(-2, -1))
        scores = (content + position) / math.sqrt(self.d_k)
        return self.attend(scores, v, allowed), (k, v)


class FeedForward(nn.Module):

    def __init__(self, dim: int, hidden: int, activation: str):
        super().__init__()
        self.w_1 = nn.Linear(dim, hidden)
        self.w_2 = nn.Linear(hidden, dim)
        self.activation = make_activation(activation)

    def forward(self, x):
        return self.w_2(self.activation(self.w_1(x)))


class ConvModule(nn.Module):

    def __init__(self, dim: int, kernel: int, causal: bool, norm: str, activation: str):
        super().__init__()
        self.pointwise_conv1 = nn.Conv1d(dim, 2 * dim, 1)
        self.left_context = kernel - 1 if causal else 0
        padding = 0 if causal else (kernel - 1) // 2
        self.depthwise_conv = nn.Conv1d(dim, dim, kernel, padding=padding, groups=dim)
        self.channel_layer_norm = norm == "layer_norm"
        self.norm = nn.LayerNorm(dim) if self.channel_layer_norm else nn.BatchNorm1d(dim)
        self.pointwise_conv2 = nn.Conv1d(dim, dim, 1)
        self.activation = make_activation(activation)

    def forward(self, x: torch.Tensor, valid: Optional[torch.Tensor],
                cache: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
        """x (B,T,C); valid bool (B,1,T) or None; cache (B,C,kernel-1) or None.
        Returns (B,T,C) and the new cache (last kernel-1 input frames)."""
        x = x.transpose(1, 2)
        if valid is not None:
            x = x.masked_fill(~valid, 0.0)
        new_cache = x.new_zeros(0, 0, 0)
        if self.left_context > 0:
            if cache is None or cache.size(2) == 0:
                x = F.pad(x, (self.left_context, 0))
            else:
                x = torch.cat([cache, x], dim=2)
            new_cache = x[:, :, -self.left_context:]
        x = F.glu(self.pointwise_conv1(x), dim=1)
        x = self.depthwise_conv(x)
        if self.channel_layer_norm:
            x = self.norm(x.transpose(1, 2)).transpose(1, 2)
        else:
            x = self.norm(x)
        x = self.pointwise_conv2(self.activation(x))
        if valid is not None:
            x = x.masked_fill(~valid, 0.0)
        return x.transpose(1, 2), new_cache


class ConformerLayer(nn.Module):

    def __init__(self, cfg: U2ppConfig):
        super().__init__()
        d = cfg.output_size
        self.normalize_before = cfg.normalize_before
        self.self_attn = RelPositionAttention(cfg.attention_heads, d)
        self.feed_forward = FeedForward(d, cfg.linear_units, cfg.activation_type)
        self.feed_forward_macaron = (FeedForward(d, cfg.linear_units, cfg.activation_type)
                                     if cfg.macaron_style else None)
        self.conv_module = (ConvModule(d, cfg.cnn_module_kernel, cfg.causal,
                                       cfg.cnn_module_norm, cfg.activation_type)
                            if cfg.use_cnn_module else None)
        self.norm_ff = nn.LayerNorm(d)
        self.norm_mha = nn.LayerNorm(d)
        if self.feed_forward_macaron is not None:
            self.norm_ff_macaron = nn.LayerNorm(d)
        if self.conv_module is not None:
            self.norm_conv = nn.LayerNorm(d)
            self.norm_final = nn.LayerNorm(d)
        self.ff_scale = 0.5 if cfg.macaron_style else 1.0

    def residual(self, x, norm, fn, scale=None):
        """One pre-norm (or post-norm) residual sub-block."""
        y = fn(norm(x) if self.normalize_before else x)
        x = x + (y if scale is None else scale * y)
        return x if self.normalize_before else norm(x)

    def forward(self, x, allowed, key_positions, valid=None, kv_cache=None, cnn_cache=None):
        if self.feed_forward_macaron is not None:
            x = self.residual(x, self.norm_ff_macaron, self.feed_forward_macaron,
                              self.ff_scale)
        new_kv = [None]

        def attention(h):
            out, new_kv[0] = self.self_attn(h, allowed, key_positions, kv_cache)
            return out

        x = self.residual(x, self.norm_mha, attention)
        new_cnn = x.new_zeros(0, 0, 0)
        if self.conv_module is not None:
            def conv(h):
                nonlocal new_cnn
                out, new_cnn = self.conv_module(h, valid, cnn_cache)
                return out

            x = self.residual(x, self.norm_conv, conv)
        x = self.residual(x, self.norm_ff, self.feed_forward, self.ff_scale)
        if self.conv_module is not None:
            x = self.norm_final(x)
        return x, new_kv[0], new_cnn


def chunk_attention_mask(frames: int, chunk: int, left_chunks: int) -> torch.Tensor:
    """(T, T) bool: frame i sees frames of its own chunk and of `left_chunks`
    chunks before it (all earlier chunks when left_chunks < 0)."""
    idx = torch.arange(frames)
    chunk_of = idx // chunk
    end = torch.clamp((chunk_of + 1) * chunk, max=frames)
    if left_chunks < 0:
        start = torch.zeros_like(idx)
    else:
        start = torch.clamp((chunk_of - left_chunks) * chunk, min=0)
    return (idx.unsqueeze(0) >= start.unsqueeze(1)) & (idx.unsqueeze(0) < end.unsqueeze(1))


class ConformerEncoder(nn.Module):

    def __init__(self, cfg: U2ppConfig):
        super().__init__()
        self.cfg = cfg
        self.global_cmvn = GlobalCMVN(cfg.input_dim)
        table = SinusoidTable(cfg.output_size, cfg.pos_table_len, cfg.persistent_pos_tables)
        self.embed = ConvSubsampling(cfg.input_layer, cfg.input_dim, cfg.output_size, table)
        self.after_norm = nn.LayerNorm(cfg.output_size)
        self.encoders = nn.ModuleList([ConformerLayer(cfg) for _ in range(cfg.num_blocks)])

    def forward(self, feats: torch.Tensor, lengths: torch.Tensor, chunk_size: int = -1,
                left_chunks: int = -1) -> Tuple[torch.Tensor, torch.Tensor]:
        """One forward over padded fbank (B, T, F) (before CMVN). chunk_size > 0
        applies WeNet's chunk mask (simulate_streaming=False); < 0 is full
        attention (for a dynamic-chunk model, as U2++ is). Returns (B, T', D)
        and the output lengths (B,)."""
        x, out_lens = self.embed(self.global_cmvn(feats), lengths)
        frames = x.size(1)
        valid = (torch.arange(frames).unsqueeze(0) < out_lens.unsqueeze(1)).unsqueeze(1)
        allowed = valid  # (B, 1, T')
        # WeNet's add_optional_chunk_mask at decoding time: a dynamic-chunk
        # model uses the requested chunk (< 0: full context); a static-chunk
        # model always uses its training chunk; otherwise no chunk mask.
        if self.cfg.use_dynamic_chunk and chunk_size > 0:
            chunk, left = chunk_size, left_chunks
        elif not self.cfg.use_dynamic_chunk and self.cfg.static_chunk_size > 0:
            chunk, left = self.cfg.static_chunk_size, left_chunks
        else:
            chunk, left = 0, -1
        if chunk > 0:
            allowed = valid & chunk_attention_mask(frames, chunk, left).unsqueeze(0)
        key_positions = self.embed.pos_enc.rows(0, frames)
        for layer in self.encoders:
            x, _, _ = layer(x, allowed, key_positions, valid)
        if self.cfg.normalize_before:
            x = self.after_norm(x)
        return x, out_lens

    def forward_chunk(self, feats: torch.Tensor, offset: int, required_cache_size: int,
                      att_cache: List[Tuple[torch.Tensor, torch.Tensor]],
                      cnn_cache: List[torch.Tensor]):
        """One streaming step on (1, window, F) fbank frames. offset = number
        of encoder frames already produced. att_cache/cnn_cache: per layer
        (empty lists on the first chunk). Returns output and the new caches."""
        assert feats.size(0) == 1
        x, _ = self.embed(self.global_cmvn(feats), torch.tensor([feats.size(1)]))
        cached = att_cache[0][0].size(2) if att_cache else 0
        keys = cached + x.size(1)
        key_positions = self.embed.pos_enc.rows(offset - cached, keys)
        if required_cache_size < 0:
            keep_from = 0
        elif required_cache_size == 0:
            keep_from = keys
        else:
            keep_from = max(keys - required_cache_size, 0)
        new_att, new_cnn = [], []
        for i, layer in enumerate(self.encoders):
            x, (k, v), cnn = layer(x, None, key_positions, None,
                                   att_cache[i] if att_cache else None,
                                   cnn_cache[i] if cnn_cache else None)
            new_att.append((k[:, :, keep_from:], v[:, :, keep_from:]))
            new_cnn.append(cnn)
        if self.cfg.normalize_before:
            x = self.after_norm(x)
        return x, new_att, new_cnn

    def forward_chunk_by_chunk(self, feats: torch.Tensor, chunk_size: int,
                               left_chunks: int = -1) -> torch.Tensor:
        """WeNet's simulate_streaming: overlapping fbank windows so that the
        subsampling needs no cache. feats (1, T, F) -> (1, T', D)."""
        assert chunk_size > 0 and feats.size(0) == 1
        if not (self.cfg.use_dynamic_chunk or self.cfg.static_chunk_size > 0):
            raise ValueError("streaming needs a model trained with static or dynamic chunks")
        rate = self.embed.rate
        context = self.embed.right_context + 1
        stride = rate * chunk_size
        window = (chunk_size - 1) * rate + context
        frames = feats.size(1)
        att_cache, cnn_cache, outputs = [], [], []
        offset = 0
        for start in range(0, frames - context + 1, stride):
            end = min(start + window, frames)
            y, att_cache, cnn_cache = self.forward_chunk(
                feats[:, start:end], offset, chunk_size * left_chunks, att_cache, cnn_cache)
            outputs.append(y)
            offset += y.size(1)
        if not outputs:
            return feats.new_zeros(1, 0, self.cfg.output_size)
        return torch.cat(outputs, dim=1)


class DecoderLayer(nn.Module):

    def __init__(self, dim: int, heads: int, hidden: int, activation: str,
                 normalize_before: bool):
        super().__init__()
        self.self_attn = MultiHeadAttention(heads, dim)
        self.src_attn = MultiHeadAttention(heads, dim)
        self.feed_forward = FeedForward(dim, hidden, activation)
        self.norm1 = nn.LayerNorm(dim)
        self.norm2 = nn.LayerNorm(dim)
        self.norm3 = nn.LayerNorm(dim)
        self.normalize_before = normalize_before

    def forward(self, x, self_allowed, memory, memory_allowed):
        pre = self.normalize_before

        h = self.norm1(x) if pre else x
        x = x + self.self_attn(h, h, h, self_allowed)
        x = x if pre else self.norm1(x)
        h = self.norm2(x) if pre else x
        x = x + self.src_attn(h, memory, memory, memory_allowed)
        x = x if pre else self.norm2(x)
        h = self.norm3(x) if pre else x
        x = x + self.feed_forward(h)
        return x if pre else self.norm3(x)


class TransformerDecoder(nn.Module):

    def __init__(self, cfg: U2ppConfig, blocks: int):
        super().__init__()
        d = cfg.output_size
        self.embed = nn.Sequential(
            nn.Embedding(cfg.vocab_size, d),
            SinusoidTable(d, cfg.pos_table_len, cfg.persistent_pos_tables))
        self.normalize_before = cfg.normalize_before
        self.after_norm = nn.LayerNorm(d)
        self.output_layer = nn.Linear(d, cfg.vocab_size)
        self.decoders = nn.ModuleList([
            DecoderLayer(d, cfg.decoder_heads, cfg.decoder_linear_units,
                         cfg.decoder_activation_type, cfg.normalize_before)
            for _ in range(blocks)
        ])

    def forward(self, memory, memory_allowed, tokens, lengths) -> torch.Tensor:
        """tokens (N, L) int64 starting with sos; lengths (N,) counting sos.
        Returns logits (N, L, V) (no softmax)."""
        steps = tokens.size(1)
        pos = torch.arange(steps)
        not_pad = (pos.unsqueeze(0) < lengths.unsqueeze(1)).unsqueeze(1)  # (N,1,L)
        causal = (pos.unsqueeze(0) <= pos.unsqueeze(1)).unsqueeze(0)  # (1,L,L)
        self_allowed = not_pad & causal
        x = self.embed[1].scale_and_add(self.embed[0](tokens))
        for layer in self.decoders:
            x = layer(x, self_allowed, memory, memory_allowed)
        if self.normalize_before:
            x = self.after_norm(x)
        return self.output_layer(x)


class BiTransformerDecoder(nn.Module):

    def __init__(self, cfg: U2ppConfig):
        super().__init__()
        self.left_decoder = TransformerDecoder(cfg, cfg.decoder_num_blocks)
        self.right_decoder = TransformerDecoder(cfg, cfg.decoder_r_num_blocks)


class CTC(nn.Module):

    def __init__(self, cfg: U2ppConfig):
        super().__init__()
        self.ctc_lo = nn.Linear(cfg.output_size, cfg.vocab_size)

    def log_softmax(self, x: torch.Tensor) -> torch.Tensor:
        return F.log_softmax(self.ctc_lo(x), dim=-1)


class U2pp(nn.Module):
    """encoder + ctc + decoder, with WeNet's state-dict layout."""

    def __init__(self, cfg: U2ppConfig):
        super().__init__()
        self.cfg = cfg
        self.encoder = ConformerEncoder(cfg)
        self.decoder = BiTransformerDecoder(cfg)
        self.ctc = CTC(cfg)
        self.eval()

    @torch.no_grad()
    def encode(self, feats: torch.Tensor, lengths: torch.Tensor, chunk_size: int = -1,
               left_chunks: int = -1, simulate_streaming: bool = False):
        """WeNet ASRModel._forward_encoder. Returns (B,T',D), lengths (B,)."""
        if simulate_streaming and chunk_size > 0:
            if feats.size(0) != 1:
                raise ValueError("simulate_streaming decodes one utterance at a time")
            out = self.encoder.forward_chunk_by_chunk(
                feats[:, :int(lengths[0])], chunk_size, left_chunks)
            return out, torch.tensor([out.size(1)])
        return self.encoder(feats, lengths, chunk_size, left_chunks)

    @torch.no_grad()
    def decoder_log_probs(self, memory: torch.Tensor, hyps: List[List[int]]):
        """WeNet forward_attention_decoder for one utterance: memory (1,T,D)
        unpadded, hyps the n-best token lists. Returns log-softmax outputs of
        the left and right decoders, each (N, Lmax+1, V): row j of the left
        output scores the token after [sos]+hyp[:j]; the right decoder reads
        [sos]+reversed(hyp) (padding = eos)."""
        n = len(hyps)
        cfg = self.cfg
        steps = max([len(h) for h in hyps] + [0]) + 1
        left = torch.full((n, steps), cfg.eos, dtype=torch.long)
        right = torch.full((n, steps), cfg.eos, dtype=torch.long)
        for i, h in enumerate(hyps):
            left[i, 0] = cfg.sos
            right[i, 0] = cfg.sos
            if h:
                left[i, 1:len(h) + 1] = torch.tensor(h)
                right[i, 1:len(h) + 1] = torch.tensor(h[::-1])
        lengths = torch.tensor([len(h) + 1 for h in hyps])
        mem = memory.expand(n, -1, -1)
        mem_allowed = torch.ones(n, 1, memory.size(1), dtype=torch.bool)
        l_out = self.decoder.left_decoder(mem, mem_allowed, left, lengths)
        r_out = self.decoder.right_decoder(mem, mem_allowed, right, lengths)
        return F.log_softmax(l_out, dim=-1), F.log_softmax(r_out, dim=-1)
