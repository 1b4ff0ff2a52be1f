"""cglint on a held-out corpus of realistic custom-gradient code, buggy and correct.

    python bench/heldout.py             lint the corpus (static, then --runtime=all), print the
                                        table and write bench/RESULTS-heldout.md
    python bench/heldout.py --verify    confirm every label with TensorFlow (no cglint involved)
    python bench/heldout.py --static    the static half only (seconds, no TensorFlow)
    python bench/heldout.py PREFIX ...  only the modules whose path starts so (no results file)
    python bench/heldout.py --drive PATH  one training step of a module (what `cglint trace` runs)
    python bench/heldout.py --corpus fixtures/heldout2 ...  the same on another corpus (its own
                                        LABELS.toml, checks in bench/<name>_checks.py, results in
                                        bench/RESULTS-<name>.md)

Corpus: `fixtures/heldout/` (modules and small packages; `--corpus` names another), labels in
its `LABELS.toml`. A bug is *caught statically* when a finding with one of its
label's codes lands on one of its label's lines; *caught* by `--runtime=all` or by `cglint trace`
(of one training step of the module: `--drive`, the label's `drive`) when a `mismatch`/`error`
verdict on the labelled function shows the bug's own symptom (SYMPTOM). A *false finding* is any
static finding, or any runtime or trace `mismatch`/`error`, on a module labelled correct. Reports
are read from the files cglint writes (`--output-file`), never from a stream TensorFlow also
writes on.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "fixtures" / "heldout"  # --corpus sets it (use_corpus)
CGLINT = [sys.executable, "-m", "cglint"]
TIMEOUT = 600


# What a runtime verdict's detail must say to show the bug's own symptom, per class (a label's
# `symptom` overrides it): a `mismatch`/`error` for another reason is not the bug found.
SYMPTOM = {
    "wrong-point": r"off by|vs autodiff",
    "upstream-dropped": r"upstream",
    "upstream-not-a-factor": r"upstream",
    "variable-order": r"order|swap",
    "variable-flat": r"each variable|list",
    "missing-variables": r"variables",
    "gradient-count": r"expected to return",
    "never-applied": r"never applied|not applied|never wrapped|not wrapped",
    "numpy-in-grad": r"numpy|Symbolic",
    "numpy-in-forward": r"numpy|Symbolic",
    "tf-function-inside": r"tf\.function",
    "keyword-call": r"keyword|expected to return",  # TensorFlow's count error is the keyword's symptom
    "variable-created-inside": r"Variable",
    "keras-variable-identity": r"Keras|\.value|never match|off by 100%|KeyError",  # zero or no gradient
    "gradient-dtype": r"dtype|float16|float32|half",
    "gradient-shape": r"shape",
    # classes of the second corpus (fixtures/heldout2)
    "wrong-derivative": r"off by|vs autodiff|vs finite",
    "sign": r"off by|vs autodiff|vs finite|sign",
    "conjugate": r"off by|vs autodiff|vs finite|conj",
    "numerical-stability": r"NaN|nan|inf|finite|off by",
    "upstream-count": r"positional|upstream|outputs",
    "tf-function-under": r"tf\.function|Tensors or ExtensionTypes",
}


def use_corpus(path: str) -> None:
    global CORPUS
    CORPUS = (ROOT / path).resolve()


def rel(corpus: Path | None = None) -> str:
    """The corpus (default: the one in use) as cglint names its files: relative to the repository."""
    return (corpus or CORPUS).relative_to(ROOT).as_posix()


def labels(corpus: Path | None = None) -> list[dict]:
    return tomllib.loads(((corpus or CORPUS) / "LABELS.toml").read_text())["module"]


def run_json(args: list[str], out: Path, command: tuple[str, ...] = ()) -> dict:
    """One cglint run writing JSON to `out` (stdout and stderr are TensorFlow's too: ignored);
    `command` is what `cglint trace` runs."""
    out.unlink(missing_ok=True)
    tail = ["--", *command] if command else []
    proc = subprocess.run([*CGLINT, *args, "--isolated", "--output-format", "json", "--output-file", str(out), *tail],
                          cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=TIMEOUT)
    if not out.exists():
        raise SystemExit(f"cglint {' '.join(args)}: no report (exit {proc.returncode})")
    return json.loads(out.read_text())


def static_findings(label: dict, report: dict, corpus: Path | None = None) -> list[tuple[str, int, str]]:
    """(file relative to the corpus, line, code) of the findings in this label's module."""
    prefix = f"{rel(corpus)}/{label['path']}"
    return sorted((d["path"].removeprefix(f"{rel(corpus)}/"), d["line"], d["code"])
                  for d in report["diagnostics"] if d["path"] == prefix or d["path"].startswith(prefix + "/"))


def caught_statically(label: dict, found: list[tuple[str, int, str]]) -> bool:
    return any(code in label.get("codes", []) and f"{path}:{line}" in label["at"] for path, line, code in found)


def runtime_verdicts(label: dict, report: dict) -> list[dict]:
    prefix = f"{rel()}/{label['path']}"
    return [e for e in report.get("runtime", []) if e["path"] == prefix or e["path"].startswith(prefix + "/")]


def flagged(verdicts: list[dict]) -> list[dict]:
    return [e for e in verdicts if e["verdict"] in ("mismatch", "error")]


def caught_at_runtime(label: dict, verdicts: list[dict]) -> bool:
    symptom = label.get("symptom") or SYMPTOM[label["class"]]
    return any(e["function"].split(".")[-1] == label["function"] and re.search(symptom, e.get("detail") or "")
               for e in flagged(verdicts))


def lint(with_runtime: bool, only: list[str]) -> list[dict]:
    """Per label: its static findings and (optionally) runtime verdicts, and what they catch."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        static = run_json(["--no-cache", rel()], Path(tmp) / "static.json")
        for label in labels():
            if only and not any(label["path"].startswith(p) for p in only):
                continue
            found = static_findings(label, static)
            row = {"label": label, "static": found, "runtime": None, "trace": None}
            if with_runtime:
                rt = run_json(["--no-cache", "--runtime=all", f"{rel()}/{label['path']}"], Path(tmp) / "rt.json")
                row["runtime"] = runtime_verdicts(label, rt)
                tr = run_json(["trace"], Path(tmp) / "trace.json",
                              (sys.executable, "bench/heldout.py", "--corpus", rel(), "--drive", label["path"]))
                row["trace"] = tr.get("runtime", [])
            rows.append(row)
            print(f"  {label['path']:32} static {[f'{c}@{p}:{n}' for p, n, c in found]}"
                  + (f" runtime {[(e['function'], e['verdict']) for e in row['runtime']]}"
                     f" trace {[(e['function'], e['verdict']) for e in row['trace']]}" if with_runtime else ""),
                  flush=True)
    return rows


def cell(text: str, width: int = 110) -> str:
    text = " ".join(str(text).split()).replace("|", "/")
    return text if len(text) <= width else text[: width - 1] + "…"


def verdict_cell(entries: list[dict] | None) -> str:
    if entries is None:
        return "-"
    return "<br>".join(f"{e['function'].split('.')[-1]}: **{e['verdict']}** {cell(e.get('detail') or '', 90)}"
                       for e in entries) or "none"


def table(rows: list[dict]) -> tuple[str, list[str]]:
    """The summary line and the markdown tables; changes against the labels are listed last."""
    kinds = ["static"] + (["runtime", "trace"] if rows and rows[0]["runtime"] is not None else [])
    by_class: dict[str, Counter] = defaultdict(Counter)
    false, wrong_reason, changes, lines = defaultdict(list), [], [], []
    for row in rows:
        label = row["label"]
        if label["status"] == "correct":
            false["static"] += [f"{label['path']}: {p}:{n} {c}" for p, n, c in row["static"]]
            for kind in kinds[1:]:
                false[kind] += [f"{label['path']}: {kind} {e['function'].split('.')[-1]}: {e['verdict']} "
                                f"{cell(e.get('detail') or '', 80)}" for e in flagged(row[kind])]
            continue
        row["caught"] = {"static": caught_statically(label, row["static"])}
        for kind in kinds[1:]:
            row["caught"][kind] = caught_at_runtime(label, row[kind])
            if not row["caught"][kind] and flagged(row[kind]):
                wrong_reason.append(f"{label['path']} ({kind}): " + "; ".join(
                    f"{e['function'].split('.')[-1]}: {e['verdict']} {cell(e.get('detail') or '', 100)}"
                    for e in flagged(row[kind])))
        by_class[label["class"]].update({"bugs": 1, **{k: int(v) for k, v in row["caught"].items()}})
        for kind, hit in row["caught"].items():
            if kind in label and hit != (label[kind] == "caught"):  # absent: not measured yet
                changes.append(f"{label['path']}: {kind} now {'caught' if hit else 'missed'} (label says {label.get(kind)})")
    buggy = [r for r in rows if r["label"]["status"] == "buggy"]
    n = len(buggy)
    summary = [f"{kind} recall {sum(r['caught'][kind] for r in buggy)}/{n}" for kind in kinds]
    if len(kinds) > 1:
        summary.append(f"any {sum(any(r['caught'].values()) for r in buggy)}/{n}")
    summary.append(f"on {len(rows) - n} correct modules: " + ", ".join(
        f"{len(false[kind])} false {'findings' if kind == 'static' else kind + ' verdicts'}" for kind in kinds))
    lines += ["| class | bugs | " + " | ".join(kinds) + " |", "| --- " * (len(kinds) + 2) + "|"]
    for cls, counts in sorted(by_class.items()):
        lines.append(f"| {cls} | {counts['bugs']} | " + " | ".join(str(counts[k]) for k in kinds) + " |")
    lines += ["", "| module | status | class | expected | static findings | --runtime=all | trace (one step) | caught |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for row in rows:
        label = row["label"]
        found = ", ".join(f"{c} {p}:{n}" for p, n, c in row["static"]) or "-"
        if label["status"] == "correct":
            wrong = row["static"] or any(flagged(row[k]) for k in kinds[1:])
            caught = "false finding" if wrong else "ok (correct)"
            expected = "none"
        else:
            caught = "+".join(k for k, hit in row["caught"].items() if hit) or "**missed**"
            expected = (", ".join(label.get("codes", [])) or "(no rule)") + f" at {', '.join(label['at'])}"
        lines.append(f"| `{label['path']}` | {label['status']} | {label.get('class', '-')} | {expected} | {found} | "
                     f"{verdict_cell(row['runtime'])} | {verdict_cell(row['trace'])} | {caught} |")
    lines += ["", "## Misses and false findings, with what the model would need", ""]
    lines += [f"- **`{r['label']['path']}`** ({r['label'].get('class', 'correct')}): {cell(r['label']['miss'], 3000)}"
              for r in rows if r["label"].get("miss")]
    for kind in kinds:
        if false[kind]:
            lines += ["", f"False {kind} {'findings' if kind == 'static' else 'verdicts'} on correct modules:", ""]
            lines += [f"- {f}" for f in false[kind]]
    if wrong_reason:
        lines += ["", "Verdicts on buggy modules that flag something other than the bug (not counted as caught):", ""]
        lines += [f"- {w}" for w in wrong_reason]
    if changes:
        lines += ["", "Changed since the labels were written:", ""] + [f"- {c}" for c in changes]
    return "; ".join(summary), lines


def write_results(summary: str, lines: list[str]) -> None:
    out = ROOT / "bench" / f"RESULTS-{CORPUS.name}.md"
    corpus = rel()
    head = [
        f"# cglint on the held-out corpus `{corpus}/`",
        "",
        f"`python bench/heldout.py --corpus {corpus}` (labels: `{corpus}/LABELS.toml`;",
        f"`python bench/heldout.py --corpus {corpus} --verify` confirms every label with TensorFlow 2.21 + Keras 3).",
        f"Static = `cglint --isolated {corpus}`; runtime = `cglint --isolated --runtime=all MODULE`;",
        f"trace = `cglint trace -- python bench/heldout.py --corpus {corpus} --drive MODULE`, one training step of",
        "the module as a program takes it (the label's `drive`).",
        "A bug is caught statically when a finding with the label's code lands on the bug's line, by",
        "runtime or trace when a `mismatch`/`error` verdict on the labelled function shows the bug's own",
        "symptom (the class's words in its detail; a verdict for another reason is listed apart, not counted).",
        "",
        f"**{summary}**",
        "",
    ]
    out.write_text("\n".join(head + lines) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


# ---------------------------------------------------------------------------------------------
# --verify: every label checked with TensorFlow, independently of cglint.


def load_tf() -> None:
    """TensorFlow, Keras and NumPy for the checks below (and a corpus's own checks module)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    global np, tf, keras
    import keras
    import numpy as np
    import tensorflow as tf


def checks() -> dict:
    """The corpus's `check_<module>` functions: below for fixtures/heldout, else bench/<name>_checks.py."""
    if CORPUS.name == "heldout":
        return globals()
    sys.path.insert(0, str(ROOT / "bench"))
    return vars(importlib.import_module(f"{CORPUS.name}_checks"))


def verify() -> int:
    load_tf()
    sys.path.insert(0, str(CORPUS))
    found = checks()
    failed = 0
    for label in labels():
        name = label["path"].removesuffix(".py").replace("/", ".")
        check = found.get("check_" + name.replace(".", "_"), None)
        if check is None:
            print(f"NO CHECK {label['path']}")
            failed += 1
            continue
        try:
            evidence = check(importlib.import_module(name))
            print(f"confirmed {label['status']:7} {label['path']:30} {evidence}", flush=True)
        except Exception as exc:  # a label TensorFlow does not confirm
            failed += 1
            print(f"NOT CONFIRMED {label['status']} {label['path']}: {type(exc).__name__}: {cell(exc, 300)}", flush=True)
    print(f"{len(labels()) - failed} of {len(labels())} labels confirmed by TensorFlow")
    return 1 if failed else 0


def _rand(*shape, seed=0, low=None, high=None):
    rng = np.random.default_rng(seed + len(shape) * 7 + sum(shape))
    if low is not None:
        return tf.constant(rng.uniform(low, high, shape), tf.float32)
    return tf.constant(rng.normal(size=shape), tf.float32)


def _grads(f, xs, sources=(), seed=1):
    """Gradients of <f(*xs), u> with a random upstream u, for xs and `sources` (variables)."""
    with tf.GradientTape() as tape:
        tape.watch(xs)
        y = f(*xs)
    u = tf.cast(_rand(*y.shape, seed=seed), y.dtype)
    return y, tape.gradient(y, [*xs, *sources], output_gradients=u), u


def _close(a, b, tol=1e-4):
    return a is not None and b is not None and a.shape == b.shape and np.allclose(a, b, rtol=tol, atol=tol)


def _same_grads(custom, reference, xs, sources=(), tol=1e-4):
    """The custom op's gradients equal autodiff's of the same maths (asserted); the largest gap."""
    _, g1, _ = _grads(custom, xs, sources)
    _, g2, _ = _grads(reference, xs, sources)
    for a, b in zip(g1, g2):
        assert _close(a, b, tol), f"custom {None if a is None else a.numpy()} vs autodiff {None if b is None else b.numpy()}"
    return max(float(np.max(np.abs(a - b))) for a, b in zip(g1, g2))


def _different_grads(custom, reference, xs, sources=()):
    """At least one gradient differs from autodiff's of the same maths (asserted); which ones."""
    _, g1, _ = _grads(custom, xs, sources)
    _, g2, _ = _grads(reference, xs, sources)
    bad = [i for i, (a, b) in enumerate(zip(g1, g2)) if not _close(a, b)]
    assert bad, "custom gradient equals autodiff"
    return "differs from autodiff at " + ", ".join(
        f"#{i} ({'None' if g1[i] is None else tuple(g1[i].shape)} vs {tuple(g2[i].shape)})" for i in bad)


def _raises(fn, *types):
    try:
        fn()
    except types as exc:
        return f"{type(exc).__name__}: {' '.join(str(exc).split())[:110]}"
    raise AssertionError("TensorFlow raised nothing")


def _built(layer, *shape):
    """A Keras layer built for an input of `shape`, and such an input."""
    x = _rand(*shape)
    layer.build(x.shape)
    return layer, x


def check_activation_table(m):
    x = _rand(4, 5)
    _same_grads(m.squareplus, lambda x: 0.5 * (x + tf.sqrt(x * x + 4.0)), [x])
    return "softsign " + _different_grads(m.softsign, lambda x: x / (1.0 + tf.abs(x)), [x]) + "; squareplus matches"


def check_output_based_derivatives(m):
    x = _rand(4, 5) * 3.0
    big = tf.concat([x, x + 40.0], 0)
    gap = max(_same_grads(m.fast_sigmoid, tf.sigmoid, [x]), _same_grads(m.fast_tanh, tf.tanh, [x]),
              _same_grads(m.safe_exp, lambda x: tf.exp(tf.minimum(x, 30.0)), [big], tol=1e-3))
    return f"sigmoid, tanh, capped exp match autodiff (max gap {gap:.1e})"


def check_gradient_reversal(m):
    x = _rand(3, 4)
    _, (g,), u = _grads(lambda x: m.reverse_gradient(x, 0.5), [x])
    assert not _close(g, -0.5 * u), "the reversal multiplies the upstream"
    return f"d/x = -lambda * ones ({g.numpy()[0, :2]}) instead of -lambda * upstream ({(-0.5 * u).numpy()[0, :2]})"


def check_grad_reverse_default(m):
    x = _rand(3, 4)
    layer = m.ReverseGradient()
    for fn in (m.grad_reverse, layer, tf.function(lambda x: layer(x))):  # as the module uses it
        _, (g,), u = _grads(fn, [x])
        assert _close(g, -u)
    # wrapping the op itself in tf.function binds the default as a third input: the hazard CG010 names
    latent = _raises(lambda: _grads(tf.function(m.grad_reverse), [x]), ValueError)
    return f"d/x = -upstream eagerly, in the layer and in the layer under tf.function (tf.function(grad_reverse) itself: {latent[:60]})"


def _layernorm_ref(x, gamma, beta, eps=1e-5):
    mean, var = tf.nn.moments(x, axes=[-1], keepdims=True)
    return gamma * (x - mean) * tf.math.rsqrt(var + eps) + beta


def check_fused_layernorm(m):
    layer, x = _built(m.FusedLayerNorm(), 3, 6)
    layer.gamma.assign(_rand(6, seed=2) + 1.0)
    layer.beta.assign(_rand(6, seed=3))
    ref = lambda x: _layernorm_ref(x, layer.gamma, layer.beta)  # noqa: E731
    under_fn = tf.function(lambda x: layer(x))
    # tf.function passes `variables` sorted by name (beta before gamma); the grad fn assumes gamma first
    return "under tf.function " + _different_grads(under_fn, ref, [x], [layer.gamma, layer.beta])


def check_rms_norm(m):
    layer, x = _built(m.RMSNorm(), 3, 6)
    layer.scale.assign(_rand(6, seed=2) + 1.0)
    layer.shift.assign(_rand(6, seed=3))

    def ref(x):
        return layer.scale * x * tf.math.rsqrt(tf.reduce_mean(x * x, -1, keepdims=True) + 1e-6) + layer.shift

    sources = [layer.scale, layer.shift]
    gap = max(_same_grads(layer, ref, [x], sources), _same_grads(tf.function(lambda x: layer(x)), ref, [x], sources))
    return f"d/x, d/scale, d/shift match autodiff eagerly and under tf.function (max gap {gap:.1e})"


def check_fake_quant(m):
    q = m.LearnedStepQuantizer(channels=4)
    x = _rand(3, 4)
    return _raises(lambda: _grads(q, [x], [q.step]), ValueError)


def check_learned_softplus(m):
    sp = m.LearnedSoftplus()
    return _raises(lambda: _grads(sp, [_rand(3, 4)], [sp.beta]), TypeError)


def check_focal_loss(m):
    p, y, a = _rand(3, 4, low=0.05, high=0.95), tf.cast(_rand(3, 4) > 0, tf.float32), tf.constant(0.25)
    return _raises(lambda: _grads(m.focal_term, [p, y, a]), ValueError)


def check_ste_ops(m):
    layer, x = _built(m.QuantDense(3), 2, 4)

    def intended(x):  # the straight-through estimator: round's gradient taken as the identity
        scale = tf.reduce_max(tf.abs(layer.kernel)) / 127.0
        w = layer.kernel / scale
        return tf.matmul(x, (w + tf.stop_gradient(tf.round(w) - w)) * scale)

    return "kernel " + _different_grads(layer, intended, [x], [layer.kernel]) + " (ste_round is never a custom gradient)"


def check_train_step_numpy(m):
    x = _rand(3, 4) * 4.0
    ref = lambda x: x * tf.clip_by_value(x + 3.0, 0.0, 6.0) / 6.0  # noqa: E731
    _same_grads(m.hard_swish, ref, [x])  # eagerly it works ...
    return "eager matches autodiff; under tf.function " + _raises(  # ... and not in model.fit / tf.function
        lambda: _grads(tf.function(m.hard_swish), [x]), AttributeError, NotImplementedError, TypeError)


def check_compiled_ops(m):
    return _raises(lambda: m.log1p_exp(_rand(3, 4)), TypeError)


def check_temperature_softmax(m):
    layer, x = _built(m.TemperatureSoftmax(), 3, 5)
    return _raises(lambda: _grads(layer, [x], [layer.log_t]), ValueError)


def check_running_norm(m):
    x = _rand(5, 3)
    for norm in (m.RunningNorm(), tf.function(m.RunningNorm())):
        for step in range(3):  # the statistics are constants of the backward pass, by design
            _, (g,), u = _grads(norm, [x + step])
            assert _close(g, u)
    return "created once (guarded by `is None`), eagerly and under tf.function; d/x = upstream as documented"


def check_contrastive_loss(m):
    a, b = _rand(3, 4), _rand(3, 4, seed=5)
    with tf.GradientTape() as tape:
        m.clip_loss(a, b)
        first = tape.watched_variables()
    with tf.GradientTape() as tape:
        m.clip_loss(a, b)
        second = tape.watched_variables()
    assert first[0] is not second[0], "the temperature persists"
    error = _raises(lambda: tf.function(m.clip_loss)(a, b), ValueError)
    return f"a new logit_scale variable on every call (never trained); under tf.function {error}"


def check_lora_dense(m):
    layer, x = _built(m.LoRADense(3, rank=2), 2, 4)

    def ref(x):
        return tf.matmul(x, layer.kernel) + tf.matmul(tf.matmul(x, layer.lora_a), layer.lora_b)

    return "lora_a/lora_b " + _different_grads(layer, ref, [x], [layer.lora_a, layer.lora_b])


def check_mixed_precision_gelu(m):
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = m.GeluDense(4)
        x = _rand(3, 4)
        layer(x)  # builds the Dense inside
        return "under mixed_float16 " + _raises(lambda: _grads(layer, [x], layer.trainable_variables),
                                                tf.errors.InvalidArgumentError)
    finally:
        keras.mixed_precision.set_global_policy("float32")


def check_prelu(m):
    x, alpha = _rand(4, 3), _rand(3, low=0.1, high=0.3)
    return _different_grads(m.prelu, lambda x, a: tf.where(x > 0.0, x, a * x), [x, alpha])


def check_robust_losses(m):
    p, t = _rand(4, 3) * 2.0, _rand(4, 3, seed=4)
    _same_grads(m.log_cosh, lambda p, t: tf.math.log(tf.cosh(p - t)), [p, t])

    def huber(p, t):
        e = p - t
        return tf.where(tf.abs(e) <= 1.0, 0.5 * e * e, tf.abs(e) - 0.5)

    return "huber " + _different_grads(m.huber, huber, [p, t]) + "; log_cosh matches"


def check_ste_sign(m):
    x = _rand(4, 5) * 1.5
    _, (g,), _ = _grads(m.ste_sign, [x])
    gap = _same_grads(m.ste_sign, lambda x: tf.clip_by_value(x, -1.0, 1.0), [x])  # the hard-tanh surrogate
    c = 1.5
    surrogate = lambda x: tf.where(tf.abs(x) <= c, 2 * x / c - x * tf.abs(x) / c**2, tf.sign(x))  # noqa: E731
    gap = max(gap, _same_grads(lambda x: m.approx_sign(x, c), surrogate, [x]))
    y = m.ste_sign(x)
    assert set(np.unique(y.numpy())) <= {-1.0, 1.0}
    return f"gradients equal autodiff of the intended surrogates (hard tanh, clipped quadratic; max gap {gap:.1e})"


def check_clip_gradient(m):
    clip = m.ClipGradient(max_norm=0.5)
    x = _rand(3, 4)
    y, (g,), u = _grads(clip, [x])
    assert _close(y, x) and _close(g, tf.clip_by_norm(u, 0.5))
    return f"identity forward; d/x = clip_by_norm(upstream, 0.5) (norm {float(tf.norm(g)):.2f}, upstream {float(tf.norm(u)):.2f})"


def check_keras_ops_logsumexp(m):
    x = _rand(3, 5)
    gap = _same_grads(m.logsumexp_pool, lambda x: tf.reduce_logsumexp(x, axis=-1), [x])
    x16 = tf.cast(x, tf.float16)
    _, (g16,), _ = _grads(m.logsumexp_pool, [x16])
    assert g16.dtype == tf.float16
    keras.mixed_precision.set_global_policy("mixed_float16")
    try:
        layer = keras.Sequential([keras.layers.Dense(5), m.LogSumExpPool()])
        layer.build((None, 5))
        _grads(layer, [x], layer.trainable_variables)
    finally:
        keras.mixed_precision.set_global_policy("float32")
    return f"matches autodiff (max gap {gap:.1e}); float16 in, float16 gradient out; trains under mixed_float16"


def check_softplus_config(m):
    x = tf.concat([_rand(3, 4) * 3.0, _rand(1, 4) + 25.0], 0)
    gap = max(_same_grads(m.softplus, tf.nn.softplus, [x]),
              _same_grads(m.sharp_softplus, lambda x: tf.nn.softplus(10.0 * x) / 10.0, [x]))
    return f"both configs match autodiff of softplus(beta x) / beta (max gap {gap:.1e})"


def check_distributed_swiglu(m):
    g, v = _rand(3, 4), _rand(3, 4, seed=6)
    gap = _same_grads(m.swiglu, lambda g, v: g * tf.sigmoid(g) * v, [g, v])
    model = m.build()
    model.fit(_rand(8, 4).numpy(), _rand(8, 1).numpy(), epochs=1, batch_size=4, verbose=0)
    return f"matches autodiff (max gap {gap:.1e}); fit runs under MirroredStrategy"


def check_swish_pkg(m):
    x = _rand(4, 5) * 2.0
    return _different_grads(m.swish, lambda x: x * tf.sigmoid(x), [x])


def check_named_weights(m):
    layer, x = _built(m.GatedLinear(3), 2, 4)
    return _raises(lambda: _grads(layer, [x], [layer.w_value, layer.w_gate]), KeyError)


def check_masked_softmax(m):
    logits, mask = _rand(2, 5), _rand(2, 5, seed=3) > -0.5
    return _raises(lambda: _grads(lambda x: m.masked_softmax(x, mask), [logits]), ValueError)


def check_calibrated_quant(m):
    x = _rand(4, 8)
    _, (g,), u = _grads(m.fake_quant_int8, [x])  # eagerly it works ...
    return "eager runs; under tf.function " + _raises(  # ... and not in model.fit / tf.function
        lambda: _grads(tf.function(m.fake_quant_int8), [x]), AttributeError, NotImplementedError, TypeError)


def check_partial_ops(m):
    layer, x = _built(m.TemperedSigmoid(), 3, 4)
    return _raises(lambda: _grads(layer, [x], [layer.temperature]), ValueError)


def check_unapplied_quant(m):
    layer, x = _built(m.TernaryDense(3), 2, 6)

    def intended(x):  # the op the module defines: ternary forward, straight-through backward
        return tf.matmul(x, m.ternarize(tf.convert_to_tensor(layer.kernel)))

    return "kernel " + _different_grads(layer, intended, [x], [layer.kernel]) + " (the layer calls _ternarize, not ternarize)"


def check_mish(m):
    x = tf.concat([_rand(4, 5) * 3.0, tf.zeros([1, 5])], 0)
    ref = lambda x: x * tf.tanh(tf.math.softplus(x))  # noqa: E731
    gap = max(_same_grads(m.mish, ref, [x]), _same_grads(m.mish_from_output, ref, [x]))
    return f"mish and mish_from_output (output-based, 0 included) match autodiff (max gap {gap:.1e})"


def check_cached_derivative(m):
    clip = m.SoftClip(limit=2.0)
    x = _rand(3, 4) * 3.0
    return _different_grads(clip, lambda x: 2.0 * tf.tanh(x / 2.0), [x])


def check_zipped_variables(m):
    layer, x = _built(m.BilinearScore(), 3, 4)
    ref = lambda x: tf.reduce_sum(x * layer.w + layer.b, axis=-1)  # noqa: E731
    # tf.function passes `variables` sorted by name (a_bias before w); the zip pairs them with (dw, db)
    return "under tf.function " + _different_grads(tf.function(lambda x: layer(x)), ref, [x], [layer.w, layer.b])


def check_fused_residual(m):
    a, b = _rand(2, 3), _rand(2, 3, seed=4)
    _same_grads(m.fused_residual, lambda a: a, [a])  # one branch works ...
    return "one branch matches; two: " + _raises(lambda: _grads(m.fused_residual, [a, b]), ValueError)


def check_value_named_weights(m):
    layer, x = _built(m.GatedLinearByName(3), 2, 4)

    def ref(x):
        return tf.matmul(x, layer.w_value) * tf.sigmoid(tf.matmul(x, layer.w_gate))

    sources = [layer.w_value, layer.w_gate]
    gap = max(_same_grads(layer, ref, [x], sources), _same_grads(tf.function(lambda x: layer(x)), ref, [x], sources))
    return f"d/x, d/w_value, d/w_gate match autodiff eagerly and under tf.function (max gap {gap:.1e})"


def drive(path: str) -> None:
    """One training step of a corpus module, as its label's `drive` says (the program that
    `cglint trace` runs)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, str(CORPUS))
    import keras
    import tensorflow as tf

    label = next(label for label in labels() if label["path"] == path)
    x = tf.random.stateless_normal([4, 6], seed=[1, 2])

    def step(fn, *inputs):
        inputs = inputs or (x,)
        with tf.GradientTape() as tape:
            tape.watch(inputs)
            y = fn(*inputs)
        return tape.gradient(y, [*inputs, *getattr(fn, "trainable_variables", [])])

    module = importlib.import_module(path.removesuffix(".py"))
    exec(label["drive"], {"m": module, "tf": tf, "keras": keras, "x": x, "step": step})


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("only", nargs="*", help="module path prefixes (default: all; then no results file is written)")
    ap.add_argument("--verify", action="store_true", help="confirm every label with TensorFlow")
    ap.add_argument("--static", action="store_true", help="static rules only; writes no results file")
    ap.add_argument("--drive", metavar="PATH", help="run one training step of a corpus module (for cglint trace)")
    ap.add_argument("--corpus", default="fixtures/heldout", help="corpus directory (default: fixtures/heldout)")
    args = ap.parse_args()
    use_corpus(args.corpus)
    if not CORPUS.is_relative_to(ROOT):
        ap.error(f"{args.corpus}: not inside the repository (cglint's reports name files relative to it)")
    if not (CORPUS / "LABELS.toml").is_file():
        ap.error(f"{args.corpus}: no LABELS.toml")
    if args.verify:
        return verify()
    if args.drive:
        drive(args.drive)
        return 0
    rows = lint(with_runtime=not args.static, only=args.only)
    summary, lines = table(rows)
    print("\n".join(lines))
    print(summary)
    if not args.static and not args.only:
        write_results(summary, lines)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
