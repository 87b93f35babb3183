"""Train the gateway's reader from SQuAD's fit split, export it to ONNX, and write its model card.

    python -m hansa.evaluation.reader_train --squad ../shared/datasets/squad --out adapters/reader/model

Needs the `export` extra (torch, transformers, onnx); the product never imports this module.

What it trains: all-MiniLM-L6-v2's encoder (the weights the `export` extra installs) as a
cross-encoder over "[CLS] question [SEP] sentence [SEP]" with two heads: `answers` (a logit on
[CLS]: does this sentence answer the question?) and a start/end pair over the sentence's tokens
(the answer span, SQuAD style). Loss: binary cross-entropy on `answers`, plus the span's
cross-entropy on positives. The word embeddings stay frozen (a third of the weights, most of the
optimizer's memory, and they need no new meaning).

Why this recipe, on two CPU cores: measured here (2026-11-27, quiet machine) a training step of
MiniLM-L6 runs ~17 question-sentence pairs/s on SQuAD's sentences (~50 at <= 44 tokens); batching pairs of
similar length, a 96-token cap and the two lowest layers frozen bring it to ~20 (the previous reader's
two stages: 21.2 and 19.0 pairs/s). A CUDA device is used when torch sees one (bf16), with the same
seed and data: on an H200 all layers train at ~2,100 pairs/s, bound by tokenising on the host.

On an accelerator whose Python lacks what building pairs needs (the sentence splitter, the data set)
or whose tool returns only small files: `--write-pairs` here, `--pairs ... --state-out` there
(`--time-budget` for a short lease), `--export-state` here (benchmarks/README.md, "The reader trained
on an accelerator").

Exports: `reader.onnx` (fp32) and `reader-int8.onnx` (ONNX Runtime's dynamic int8 quantization of
its MatMul weights); the runtime (onnx.py) ships the one the card names.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import time
from pathlib import Path
from typing import Any, Sequence

from hansa.evaluation.reader_pairs import Pair, read_pairs, write_pairs

INPUTS = ("input_ids", "attention_mask", "token_type_ids")
OUTPUTS = ("answers", "start_logits", "end_logits")
OPSET = 17


def _torch():
    try:
        import torch
        from transformers import AutoTokenizer, BertModel
    except ImportError as exc:  # the export extra is what training needs
        raise SystemExit(f"training the reader needs the `export` extra (torch, transformers): pip install 'hansa[export]' ({exc})")
    return torch, AutoTokenizer, BertModel


def build_model(base_dir: Path, layers: int = 0):
    torch, _, BertModel = _torch()

    class ReaderNet(torch.nn.Module):
        """The encoder and the two heads; `forward` returns what the ONNX graph returns."""

        def __init__(self) -> None:
            super().__init__()
            # .float(): a base stored in half precision (what travels to an accelerator) trains in fp32
            self.bert = BertModel.from_pretrained(str(base_dir), add_pooling_layer=False).float()
            if layers:
                self.bert.encoder.layer = self.bert.encoder.layer[:layers]
                self.bert.config.num_hidden_layers = layers
            hidden = self.bert.config.hidden_size
            self.answers = torch.nn.Linear(hidden, 1)
            self.span = torch.nn.Linear(hidden, 2)

        def forward(self, input_ids, attention_mask, token_type_ids):
            h = self.bert(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids).last_hidden_state
            start, end = self.span(h).unbind(-1)
            outside = (token_type_ids == 0) | (attention_mask == 0)  # only the sentence's tokens can be a span
            start = start.masked_fill(outside, -1e4)
            end = end.masked_fill(outside, -1e4)
            return self.answers(h[:, 0]).squeeze(-1), start, end

    return ReaderNet()


def encode(tokenizer: Any, pairs: Sequence[Pair], max_length: int) -> dict[str, Any]:
    """Tokenized batch, plus the span's token positions (0 for negatives, masked out of the loss)."""
    enc = tokenizer([p.question for p in pairs], [p.sentence for p in pairs], truncation="only_second",
                    max_length=max_length, padding=True, return_offsets_mapping=True, return_tensors="pt")
    starts, ends, has_span = [], [], []
    for i, pair in enumerate(pairs):
        s = e = 0
        if pair.span is not None:
            seq = enc.sequence_ids(i)
            a, b = pair.span
            for t, (lo, hi) in enumerate(enc["offset_mapping"][i].tolist()):
                if seq[t] != 1 or hi <= lo:
                    continue
                if s == 0 and hi > a:
                    s = t
                if lo < b:
                    e = t
            if e < s:
                s = e = 0
        starts.append(s)
        ends.append(e)
        has_span.append(s > 0)
    enc.pop("offset_mapping")
    return {"enc": enc, "start": starts, "end": ends, "has_span": has_span}


def batches(pairs: Sequence[Pair], size: int, seed: int) -> list[list[Pair]]:
    """Shuffled batches of similar length (a padded batch costs its longest pair; sorting within
    windows of 64 batches cut padding without ordering the epoch by length)."""
    rng = random.Random(seed)
    order = list(range(len(pairs)))
    rng.shuffle(order)
    out: list[list[Pair]] = []
    window = size * 64
    for at in range(0, len(order), window):
        chunk = sorted(order[at:at + window], key=lambda i: len(pairs[i].question) + len(pairs[i].sentence))
        out += [[pairs[i] for i in chunk[k:k + size]] for k in range(0, len(chunk), size)]
    rng.shuffle(out)
    return out


def build_pairs(args: argparse.Namespace) -> tuple[list[Pair], list[dict[str, Any]]]:
    """The run's pairs and, for `--pairs` files, each file's recipe (its `made_by`, for train.json and the
    card): read from the files, else built from SQuAD (the stage's builder; imported here because
    building needs the sentence splitter, reading does not)."""
    if args.pairs:
        files = [read_pairs(Path(path)) for path in args.pairs]
        return [p for pairs, _ in files for p in pairs], [made_by for _, made_by in files]
    if args.stage == "contrast":
        from hansa.evaluation.reader_contrast import contrast_pairs

        return contrast_pairs(Path(args.squad), args.questions, args.seed, args.dev_questions, args.off_topic), []
    from hansa.evaluation.reader_pairs import training_pairs

    return training_pairs(Path(args.squad), args.questions, args.seed), []


def train(args: argparse.Namespace) -> dict[str, Any]:
    torch, AutoTokenizer, _ = _torch()
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    device = "cuda" if torch.cuda.is_available() and not args.cpu else "cpu"
    base = Path(args.base) if args.base else _packaged_minilm()
    tokenizer = AutoTokenizer.from_pretrained(str(base))
    model = build_model(base, args.layers)
    if args.init:  # a missing or foreign graph is refused before minutes of reading SQuAD
        load_onnx_weights(model, init_graph(Path(args.init)))
    # the pairs draw from their own random.Random(seed): built after the model, they are the same pairs
    pairs, pairs_files = build_pairs(args)
    model = model.to(device)
    frozen = [model.bert.embeddings.word_embeddings, *model.bert.encoder.layer[:args.freeze_layers]]
    for p in (p for module in frozen for p in module.parameters()):
        p.requires_grad = False
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.01)
    steps = math.ceil(len(pairs) / args.batch) * args.epochs
    warm = max(1, int(0.06 * steps))
    # the decay's end: all planned steps, or (under --time-budget) the steps the budget holds at the rate
    # measured so far, so a cut-short run still ends with its learning rate decayed
    horizon = [steps]
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: min((k + 1) / warm, max(0.0, (horizon[0] - k) / max(1, horizon[0] - warm))))
    bce = torch.nn.BCEWithLogitsLoss()
    ce = torch.nn.CrossEntropyLoss(reduction="none")
    model.train()
    t0, step, seen, log, stopped = time.time(), 0, 0, [], False
    t50 = t0
    for epoch in range(args.epochs):
        for batch in batches(pairs, args.batch, args.seed + epoch):
            if step >= horizon[0] or (args.time_budget and time.time() - t0 > args.time_budget):
                stopped = True  # the accelerator's lease is short: keep what was learned rather than lose it all
                break
            b = encode(tokenizer, batch, args.max_length)
            enc = {k: v.to(device) for k, v in b["enc"].items()}
            # bf16 on a GPU (its matrix units); the losses run in fp32 either way
            with torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
                answers, start, end = model(enc["input_ids"], enc["attention_mask"], enc["token_type_ids"])
            answers, start, end = answers.float(), start.float(), end.float()
            y = torch.tensor([p.label for p in batch], dtype=torch.float32, device=device)
            loss = bce(answers, y)
            mask = torch.tensor(b["has_span"], dtype=torch.float32, device=device)
            if mask.sum() > 0:
                s_t = torch.tensor(b["start"], device=device)
                e_t = torch.tensor(b["end"], device=device)
                span_loss = ((ce(start, s_t) + ce(end, e_t)) * mask).sum() / mask.sum()
                loss = loss + args.span_weight * span_loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            sched.step()
            opt.zero_grad()
            step += 1
            seen += len(batch)
            if args.time_budget and step == 50:
                t50 = time.time()  # the first steps are slow (the device warms up): the rate is measured after them
            elif args.time_budget and step > 50 and step % 50 == 0:
                left = args.time_budget - (time.time() - t0)
                horizon[0] = max(warm + 1, min(steps, step + int(left * (step - 50) / (time.time() - t50))))
            if step % args.log_every == 0 or step == steps:
                rate = seen / (time.time() - t0)
                log.append({"step": step, "of": steps, "loss": round(float(loss.detach()), 4), "pairs_per_s": round(rate, 1)})
                print(json.dumps(log[-1]), flush=True)
        if stopped:
            break
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model.eval().cpu()
    if args.state_out:
        save_state(model, out)
    else:
        export(model, tokenizer, out)
    return {"pairs": len(pairs), "positives": sum(p.label for p in pairs), "steps": step, "device": device,
            **({"device_name": torch.cuda.get_device_name()} if device == "cuda" else {}),
            "train_s": round(time.time() - t0, 1), "pairs_per_s": round(seen / (time.time() - t0), 1),
            "base": "sentence-transformers/all-MiniLM-L6-v2", "layers": len(model.bert.encoder.layer), "log": log[-5:],
            **({"stopped_at_time_budget": True, "planned_steps": steps} if stopped else {}),
            **({"pairs_files": pairs_files} if args.pairs else {}),
            **({"init": _lineage(Path(args.init))} if args.init else {})}


WORD_EMBEDDINGS = "bert.embeddings.word_embeddings.weight"  # frozen: never saved, always the base's
STATE_SHARD_BYTES = 15 * 2**20  # what one file back from an accelerator may weigh (its tool returns files of <= 16 MiB)


def save_state(model: Any, out: Path) -> None:
    """Every weight but the frozen word embeddings (they are the base's), fp32, in shards
    `state-NN.safetensors` of <= STATE_SHARD_BYTES; `--export-state` makes the graphs from them here."""
    from safetensors.torch import save_file

    shard: dict[str, Any] = {}
    size, n = 0, 0
    for name, tensor in model.state_dict().items():
        if name == WORD_EMBEDDINGS:
            continue
        if shard and size + tensor.numel() * 4 > STATE_SHARD_BYTES:
            save_file(shard, str(out / f"state-{n:02d}.safetensors"))
            shard, size, n = {}, 0, n + 1
        shard[name] = tensor.float().contiguous()
        size += tensor.numel() * 4
    if shard:
        save_file(shard, str(out / f"state-{n:02d}.safetensors"))


def export_state(args: argparse.Namespace) -> dict[str, Any]:
    """The graphs of a run that saved its weights (`--state-out`), on the packaged base: the word
    embeddings, frozen in training, are the base's own in full precision."""
    torch, AutoTokenizer, _ = _torch()
    from safetensors.torch import load_file

    state_dir = Path(args.export_state)
    shards = sorted(state_dir.glob("state-*.safetensors"))
    if not (state_dir / "train.json").is_file() or not shards:
        raise SystemExit(f"--export-state: {state_dir} holds no train.json and state-NN.safetensors (a directory "
                         "`reader_train --state-out` wrote)")
    info = json.loads((state_dir / "train.json").read_text())
    base = Path(args.base) if args.base else _packaged_minilm()
    model = build_model(base, info.get("args", {}).get("layers", 0))
    state = model.state_dict()
    saved = {k: v for shard in shards for k, v in load_file(str(shard)).items()}
    missing = sorted(set(state) - set(saved) - {WORD_EMBEDDINGS})
    if missing or set(saved) - set(state):
        raise SystemExit(f"--export-state: {state_dir}'s shards do not hold this reader's weights "
                         f"(missing {', '.join(missing[:3]) or 'none'}; a shard lost or another model's)")
    state.update(saved)
    model.load_state_dict(state)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    export(model.eval(), AutoTokenizer.from_pretrained(str(base)), out)
    return info


def _lineage(init: Path) -> dict[str, Any]:
    """The stage this run continued (its train.json), so the card can say how the whole model was made."""
    path = init / "train.json"
    return json.loads(path.read_text()) if path.is_file() else {"missing": str(path)}


def init_graph(init: Path) -> Path:
    """The graph a run continues: the directory's fp32 `reader.onnx`, else its `reader-int8.onnx` (the
    package ships only the int8 graph, so the packaged reader can be continued too, from its weights
    dequantized)."""
    for name in ("reader.onnx", "reader-int8.onnx"):
        if (init / name).is_file():
            return init / name
    raise SystemExit(f"--init: {init} holds neither reader.onnx nor reader-int8.onnx (a reader directory written "
                     "by this script, or the packaged one)")


def _float_initializers(proto: Any) -> dict[str, Any]:
    """Every initializer as an array; a weight ONNX Runtime's dynamic quantization stored as
    `X_quantized` with `X_scale` and `X_zero_point` is also given dequantized, as `X`."""
    from onnx import numpy_helper

    values = {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}
    for name in [k for k in values if k.endswith("_quantized")]:
        base = name[: -len("_quantized")]
        if base + "_scale" in values and base + "_zero_point" in values:
            zero = values[base + "_zero_point"].astype("float32")
            values[base] = (values[name].astype("float32") - zero) * values[base + "_scale"].astype("float32")
    return values


def load_onnx_weights(model: Any, graph: Path) -> None:
    """Start from a reader this script exported: stage two continues stage one.

    Why from the ONNX graph: it is the artifact a training run leaves (no second checkpoint format to
    keep). The exporter keeps every parameter's name except the Linear weights it feeds to MatMul
    (renamed `onnx::MatMul_N`, stored transposed); each such MatMul is followed (through the int8
    graph's Cast and Mul) by an Add of its bias, whose name gives the weight's. The int8 graph's
    weights are dequantized (`_float_initializers`; the quantizer also keeps a transposed copy of a
    Linear it stored as `X_Transposed`). Every parameter of `model` must be found, with its shape."""
    torch, _, _ = _torch()
    import onnx

    proto = onnx.load(str(graph))  # init_graph found it
    values = _float_initializers(proto)
    named = {k: v for k, v in values.items() if not k.startswith("onnx::") and not k.endswith(("_quantized", "_scale", "_zero_point"))}
    for k in [k for k in named if k.endswith("_Transposed")]:
        named.setdefault(k[: -len("_Transposed")], named[k].T)
    consumers: dict[str, list[Any]] = {}
    for node in proto.graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    for node in proto.graph.node:
        weight = next((x.removesuffix("_quantized") for x in node.input if x.startswith("onnx::MatMul")), None)
        if node.op_type not in ("MatMul", "MatMulInteger") or weight is None or weight not in values:
            continue
        bias, out = None, node.output[0]
        for _ in range(3):  # MatMul -> Add, or MatMulInteger -> Cast -> Mul -> Add
            after = consumers.get(out, [])
            if len(after) != 1:
                break
            bias = next((x for x in after[0].input if x.endswith(".bias") and x in values), None) if after[0].op_type == "Add" else None
            if bias is not None:
                break
            out = after[0].output[0]
        if bias is not None:
            named[bias[: -len("bias")] + "weight"] = values[weight].T
    state = model.state_dict()
    missing = [k for k in state if k not in named or tuple(named[k].shape) != tuple(state[k].shape)]
    if missing:
        raise SystemExit(f"--init: {graph} does not hold this reader's parameters ({', '.join(missing[:4])} ...)")
    model.load_state_dict({k: torch.from_numpy(named[k].astype("float32").copy()) for k in state})


def export(model: Any, tokenizer: Any, out: Path) -> None:
    """reader.onnx (fp32), reader-int8.onnx and tokenizer.json into `out`."""
    torch, _, _ = _torch()
    sample = tokenizer(["what is it?"], ["It is a test sentence."], return_tensors="pt")
    args = tuple(sample[k] for k in INPUTS)
    axes = {k: {0: "batch", 1: "tokens"} for k in INPUTS}
    axes.update({"answers": {0: "batch"}, "start_logits": {0: "batch", 1: "tokens"}, "end_logits": {0: "batch", 1: "tokens"}})
    fp32 = out / "reader.onnx"
    torch.onnx.export(model, args, str(fp32), input_names=list(INPUTS), output_names=list(OUTPUTS),
                      dynamic_axes=axes, opset_version=OPSET, dynamo=False)
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(fp32), str(out / "reader-int8.onnx"), weight_type=QuantType.QInt8)
    tokenizer.backend_tokenizer.save(str(out / "tokenizer.json"))


def _packaged_minilm() -> Path:
    from hansa.adapters.embedder.local_model import packaged_model_dir

    return packaged_model_dir()


def main(argv: Sequence[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--squad", default="", help="the SQuAD folder (passages.jsonl.gz, questions.jsonl.gz); needed unless --pairs or --export-state")
    ap.add_argument("--out", default="", help="where reader.onnx, reader-int8.onnx, tokenizer.json and train.json go")
    ap.add_argument("--base", default="", help="a BERT-style model directory (default: the packaged all-MiniLM-L6-v2)")
    ap.add_argument("--stage", choices=("base", "contrast"), default="base",
                    help="base: answer sentences and near misses (reader_pairs); contrast: unanswerable twins and "
                         "SQuAD 2.0's fit unanswerables (reader_contrast), continuing a base reader given by --init")
    ap.add_argument("--init", default="", help="a reader directory this script wrote, or adapters/reader/model: start "
                                             "from its reader.onnx (else its reader-int8.onnx, dequantized)")
    ap.add_argument("--questions", type=int, default=10000, help="fit-split train questions to sample (0: all)")
    ap.add_argument("--dev-questions", type=int, default=0,
                    help="contrast stage: SQuAD 2.0 dev fit questions of the trainable articles to read (0: all)")
    ap.add_argument("--off-topic", type=int, default=0,
                    help="contrast stage: sentences of other articles sharing the question's words, per question "
                         "(negatives; reader_contrast.off_topic_sentences)")
    ap.add_argument("--layers", type=int, default=0, help="keep only the first N encoder layers (0: all; the CI smoke uses 1)")
    ap.add_argument("--freeze-layers", type=int, default=2, help="lower encoder layers left as all-MiniLM-L6-v2 trained them")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--span-weight", type=float, default=0.5)
    ap.add_argument("--max-length", type=int, default=96)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--cpu", action="store_true", help="train on the CPU even when torch sees a GPU")
    ap.add_argument("--write-pairs", default="", help="build this stage's pairs, write them to this file (gzip JSON) and "
                                                    "stop: no torch needed (what an accelerator without the data set trains on)")
    ap.add_argument("--pairs", action="append", default=[], help="train on pairs files --write-pairs wrote (repeatable: "
                                                                 "their union) instead of building pairs; --squad is then unused")
    ap.add_argument("--time-budget", type=float, default=0.0, help="stop training after this many seconds and keep what "
                                                                   "was learned (0: none; for an accelerator's short lease)")
    ap.add_argument("--state-out", action="store_true", help="write the trained weights (state-NN.safetensors, <= 15 MiB "
                                                             "each) instead of the graphs; make these with --export-state")
    ap.add_argument("--export-state", default="", help="a directory --state-out wrote: export its graphs, tokenizer and "
                                                      "train.json into --out, on the packaged base, and stop")
    ap.add_argument("--log-every", type=int, default=20, help="steps between progress lines")
    args = ap.parse_args(argv)
    if not args.out and not args.write_pairs:
        ap.error("--out is needed (where the reader goes)")
    if not args.squad and not args.pairs and not args.export_state:
        ap.error("--squad is needed to build pairs (or train on --pairs files, or --export-state a run)")
    if args.write_pairs:
        made_by = {k: v for k, v in vars(args).items() if k in ("stage", "questions", "dev_questions", "off_topic", "seed")}
        pairs, _ = build_pairs(args)
        write_pairs(Path(args.write_pairs), pairs, made_by)
        print(json.dumps({"pairs": len(pairs), "positives": sum(p.label for p in pairs), "file": args.write_pairs, **made_by}))
        return
    if args.export_state:
        info = export_state(args)
        (Path(args.out) / "train.json").write_text(json.dumps(info, indent=1) + "\n")
        print(json.dumps({k: v for k, v in info.items() if k != "log"}))
        return
    started = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    info = train(args)
    info.update({"started": started, "args": {k: v for k, v in vars(args).items() if k not in ("squad", "out")}})
    (Path(args.out) / "train.json").write_text(json.dumps(info, indent=1) + "\n")
    print(json.dumps({k: v for k, v in info.items() if k != "log"}))


if __name__ == "__main__":
    main()
