#!/usr/bin/env python3
"""Oracle for src/decode/whisper_search: Hugging Face transformers' own
generate() (GenerationMixin._sample for greedy, _beam_search with
BeamSearchScorer for beams, SuppressTokensLogitsProcessor and
SuppressTokensAtBeginLogitsProcessor built from the generation config, the
MaxLengthCriteria / EosTokenCriteria stopping rules) driving a tiny
"table" language model instead of Whisper's decoder.

The table model: the logits for the token after a sequence s depend on the
utterance, on len(s) - prompt_len and on the last token of s,
table[utterance, len(s) - prompt_len, s[-1], :]. That gives beam search real
prefix dependence while staying a fixed table that the C++ test can replay
through its abstract decoder step. Each utterance has its own eos bias, so
some hypotheses end at eos early, some late and some run into max_length.

Whisper's generate() reaches exactly these code paths for short-form audio
without timestamps: it builds the same two suppress processors (begin_index =
prompt length) and calls GenerationMixin.generate with the forced prompt as
decoder_input_ids; only the model differs.

Timestamp cases add transformers' WhisperTimeStampLogitsProcessor (what
generate(return_timestamps=True) appends after the suppress processors, with
begin_index = prompt length) over a vocabulary with timestamp tokens
(TS_BEGIN.. V_TS - 1); their prompt has no <|notimestamps|>.

Writes OUT/cases.safetensors: per case "<case>/table" float32 [B, M, V, V],
"<case>/tokens" int64 [B, W] (generated ids after the prompt, eos excluded,
padded with -1), "<case>/lengths" int64 [B], "<case>/reached_eos" int64 [B],
"<case>/score_bits" int64 [B] (float64 bit patterns: beam search: HF's
sequences_scores; greedy: the sum of the chosen tokens' log_softmax values,
eos included, computed here). Metadata "cases": the search parameters.
"""

import argparse
import json
import os

import torch
from safetensors.torch import save_file
from transformers import GenerationConfig, PretrainedConfig, PreTrainedModel
from transformers.generation.logits_process import (LogitsProcessorList,
                                                    WhisperTimeStampLogitsProcessor)
from transformers.modeling_outputs import CausalLMOutput

V = 24
EOS = 20
SOT = 21
LANG = 18
TRANSCRIBE = 19
NO_TIMESTAMPS = 23
SUPPRESS = [1, 7, 22]
BEGIN_SUPPRESS = [0, EOS]
# Timestamp cases: 16 timestamp tokens after <|notimestamps|>.
TS_BEGIN = NO_TIMESTAMPS + 1
V_TS = TS_BEGIN + 16
# eos logit bias of each utterance: ends soon, ends late, runs into max_length.
EOS_BIAS = [1.5, -1.0, -9.0]

CASES = []
TENSORS = {}


class TableConfig(PretrainedConfig):
    model_type = "oasr_table_lm"


class TableLM(PreTrainedModel):
    config_class = TableConfig

    def __init__(self, config, table, prompt_len):
        super().__init__(config)
        self.table = table  # [M, V, V]
        self.prompt_len = prompt_len
        self.anchor = torch.nn.Parameter(torch.zeros(1))  # a parameter to give the model a device

    def forward(self, input_ids, attention_mask=None, **kwargs):
        rows, length = input_ids.shape
        logits = torch.zeros(rows, length, self.table.shape[-1])
        for t in range(self.prompt_len - 1, length):
            logits[:, t] = self.table[t + 1 - self.prompt_len, input_ids[:, t]]
        return CausalLMOutput(logits=logits)

    def prepare_inputs_for_generation(self, input_ids, **kwargs):
        return {"input_ids": input_ids}


def make_tables(gen, max_new):
    tables = torch.randn(len(EOS_BIAS), max_new, V, V, generator=gen) * 2.5
    for u, bias in enumerate(EOS_BIAS):
        # The bias grows with the position so early steps rarely end.
        for pos in range(max_new):
            tables[u, pos, :, EOS] += bias + 0.4 * pos
    return tables


def timestamp_tables(gen, max_new):
    """Tables over V_TS tokens whose timestamp logits are raised at random
    positions, so the rules (pairs, no decrease, the first-token rule, the
    total-probability rule) all decide some steps."""
    tables = torch.randn(len(EOS_BIAS), max_new, V_TS, V_TS, generator=gen) * 2.5
    tables[..., TS_BEGIN:] += torch.randn(len(EOS_BIAS), max_new, V_TS, 1, generator=gen) * 2.0
    for u, bias in enumerate(EOS_BIAS):
        for pos in range(max_new):
            tables[u, pos, :, EOS] += bias + 0.4 * pos
    return tables


def eos_rank_tables(gen, max_new):
    """For num_beams = 2 and early_stopping true, a table where HF's rule
    "an eos ranked num_beams or lower is not kept" decides the result. Step
    1: tokens 4 and 5. Step 2: candidates in rank order [4 6], [4 eos] (kept:
    the first finished hypothesis), [5 eos] (rank 2: dropped), [5 8]. Step 3:
    [4 6 eos] finishes with the best score. Keeping [5 eos] would have made
    two finished hypotheses at step 2 and stopped there with [4]."""
    tables = torch.randn(3, max_new, V, V, generator=gen) * 0.1
    tables[:, 0] = -30.0
    tables[:, 0, :, 4] = 0.0
    tables[:, 0, :, 5] = -2.0
    tables[:, 1, 4] = -30.0
    tables[:, 1, 4, EOS] = 0.0
    tables[:, 1, 4, 6] = -0.1
    tables[:, 1, 5] = -30.0
    tables[:, 1, 5, EOS] = 0.0
    tables[:, 1, 5, 8] = -1.0
    tables[:, 2, 6] = -30.0
    tables[:, 2, 6, EOS] = 0.0
    return tables


def hf_generate(table, prompt, params):
    model = TableLM(TableConfig(vocab_size=table.shape[-1]), table, len(prompt)).eval()
    early = {"false": False, "true": True, "never": "never"}[params["early_stopping"]]
    config = GenerationConfig(
        max_length=params["max_length"], num_beams=params["num_beams"],
        length_penalty=params["length_penalty"], early_stopping=early,
        eos_token_id=params["eos_token_id"], pad_token_id=params["pad_token_id"],
        suppress_tokens=params["suppress_tokens"],
        begin_suppress_tokens=params["begin_suppress_tokens"], do_sample=False, use_cache=False)
    processors = LogitsProcessorList()
    if params.get("timestamps"):
        ts = params["timestamps"]
        ts_config = GenerationConfig(
            no_timestamps_token_id=ts["no_timestamps_token_id"], eos_token_id=params["eos_token_id"],
            max_initial_timestamp_index=ts["max_initial_timestamp_index"])
        processors.append(WhisperTimeStampLogitsProcessor(ts_config, begin_index=len(prompt)))
    ids = torch.tensor([prompt])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                             generation_config=config, synced_gpus=False,
                             logits_processor=processors,
                             return_dict_in_generate=True, output_scores=True)
    seq = out.sequences[0].tolist()[len(prompt):]
    reached_eos = len(seq) > 0 and seq[-1] == params["eos_token_id"]
    tokens = seq[:-1] if reached_eos else seq
    if params["num_beams"] > 1:
        score = float(out.sequences_scores[0])
    else:
        # Greedy: the chosen tokens' log-probabilities under the raw table rows.
        score, last = 0.0, prompt[-1]
        for pos, token in enumerate(seq):
            score += float(torch.log_softmax(table[pos, last], dim=-1)[token])
            last = token
    return tokens, reached_eos, score


def add_case(name, tables, prompt, **overrides):
    params = {
        "prompt": prompt, "eos_token_id": EOS, "pad_token_id": EOS,
        "suppress_tokens": SUPPRESS, "begin_suppress_tokens": BEGIN_SUPPRESS,
        "max_length": len(prompt) + tables.shape[1], "num_beams": 1, "length_penalty": 1.0,
        "early_stopping": "false",
    }
    params.update(overrides)
    assert params["max_length"] - len(prompt) <= tables.shape[1]
    results = [hf_generate(tables[u], prompt, params) for u in range(tables.shape[0])]
    width = max(1, max(len(r[0]) for r in results))
    tokens = torch.full((len(results), width), -1, dtype=torch.int64)
    for u, (t, _, _) in enumerate(results):
        tokens[u, :len(t)] = torch.tensor(t, dtype=torch.int64)
    CASES.append({"name": name, **params})
    TENSORS[f"{name}/table"] = tables.contiguous().clone()
    TENSORS[f"{name}/tokens"] = tokens
    TENSORS[f"{name}/lengths"] = torch.tensor([len(r[0]) for r in results], dtype=torch.int64)
    TENSORS[f"{name}/reached_eos"] = torch.tensor([int(r[1]) for r in results], dtype=torch.int64)
    TENSORS[f"{name}/score_bits"] = torch.tensor([r[2] for r in results],
                                                 dtype=torch.float64).view(torch.int64)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", required=True, help="directory to write cases.safetensors to")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    gen = torch.Generator().manual_seed(20241)

    english = [SOT, NO_TIMESTAMPS]
    multilingual = [SOT, LANG, TRANSCRIBE, NO_TIMESTAMPS]
    long_tables = make_tables(gen, 14)
    short_tables = make_tables(gen, 5)
    add_case("greedy", long_tables, english)
    add_case("greedy_short", short_tables, multilingual)
    add_case("greedy_pad", long_tables, english, pad_token_id=22)
    for lp in (1.0, 0.5, 2.0, -1.0):
        tag = str(lp).replace(".", "p").replace("-", "m")
        add_case(f"beam5_lp{tag}", long_tables, english, num_beams=5, length_penalty=lp)
        add_case(f"beam5_lp{tag}_short", short_tables, multilingual, num_beams=5, length_penalty=lp)
    add_case("beam3_early_true", long_tables, english, num_beams=3, early_stopping="true")
    add_case("beam4_never", long_tables, english, num_beams=4, early_stopping="never")
    add_case("beam4_never_lp0p5", long_tables, multilingual, num_beams=4, early_stopping="never",
             length_penalty=0.5, max_length=12)
    add_case("beam2_no_suppress", long_tables, english, num_beams=2, suppress_tokens=[],
             begin_suppress_tokens=[])
    results = add_case("beam2_eos_rank", eos_rank_tables(gen, 4), english, num_beams=2,
                       early_stopping="true", begin_suppress_tokens=[])
    assert all(tokens == [4, 6] for tokens, _, _ in results), results

    ts_tables = timestamp_tables(gen, 16)
    rules = {"no_timestamps_token_id": NO_TIMESTAMPS, "timestamp_begin": TS_BEGIN,
             "max_initial_timestamp_index": 3}
    timestamped = []
    for name, prompt, overrides in (
            ("ts_greedy", [SOT], {}),
            ("ts_greedy_multilingual", [SOT, LANG, TRANSCRIBE], {}),
            ("ts_greedy_no_initial_limit", [SOT],
             {"timestamps": dict(rules, max_initial_timestamp_index=None)}),
            ("ts_beam5", [SOT], {"num_beams": 5}),
            ("ts_beam3_multilingual", [SOT, LANG, TRANSCRIBE], {"num_beams": 3})):
        overrides.setdefault("timestamps", rules)
        timestamped += add_case(name, ts_tables, prompt, **overrides)
    # The timestamp rules must have produced pairs and text between them.
    ts_counts = [sum(t >= TS_BEGIN for t in tokens) for tokens, _, _ in timestamped]
    assert max(ts_counts) >= 4 and any(
        any(t < TS_BEGIN for t in tokens) for tokens, _, _ in timestamped), timestamped

    # The cases must exercise both endings; a silent change of the tables
    # that lost one would weaken the test.
    ends = [bool(v) for k, t in TENSORS.items() if k.endswith("/reached_eos") for v in t.tolist()]
    assert any(ends) and not all(ends), "every hypothesis ends the same way"
    save_file(TENSORS, os.path.join(args.out, "cases.safetensors"),
              metadata={"cases": json.dumps(CASES)})


if __name__ == "__main__":
    main()
