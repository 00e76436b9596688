"""What a precision rung costs in accuracy, against the reference rung (fp32 static).

`outputs_agree`: the largest absolute difference of the outputs and how often the top-1 class
is the same. `paired_accuracy`: each one's accuracy on the same held-out samples, and the change
(b - c) / n, b the samples only the rung gets right and c those only the reference gets right,
with Newcombe's hybrid score interval for *paired* proportions (`newcombe_paired`): the two
answer the same samples, and an unpaired interval would be far too wide. `evaluate` and
`evaluate_rungs` judge built rungs. docs/precision_ladder.md ("Accuracy beside speed") gives
the references and why this interval.
"""
import math

import numpy as np

METHOD = "Newcombe (1998) hybrid score interval for paired proportions"


def _top1(outputs):
    outputs = np.asarray(outputs)
    return outputs.argmax(axis=1) if outputs.ndim == 2 else outputs.astype(np.int64)


def outputs_agree(reference, outputs):
    """{'max_abs_diff', 'top1_agreement', 'agreement_n'} of two (n, classes) numpy arrays."""
    reference, outputs = np.asarray(reference, dtype=np.float64), np.asarray(outputs, dtype=np.float64)
    if reference.shape != outputs.shape or reference.ndim != 2 or not len(reference):
        raise ValueError("outputs of shape %s against the reference's %s: give two (n, classes) arrays of one "
                         "shape" % (outputs.shape, reference.shape))
    return {"max_abs_diff": float(np.abs(outputs - reference).max()),
            "top1_agreement": float((outputs.argmax(axis=1) == reference.argmax(axis=1)).mean()),
            "agreement_n": int(len(reference))}


def wilson(successes, n, level=0.95):
    """The Wilson score interval (low, high) of a proportion, from SciPy."""
    from scipy.stats import binomtest
    ci = binomtest(int(successes), int(n)).proportion_ci(confidence_level=level, method="wilson")
    return float(ci.low), float(ci.high)


def newcombe_paired(both, only_first, only_second, neither, level=0.95):
    """(difference, low, high) of p1 - p2 for paired binary outcomes: `both` samples right for
    both, `only_first` right for the first only, `only_second` for the second only, `neither`
    for neither. Newcombe's (1998) method 10: each proportion's Wilson interval combined with
    their correlation (phi, continuity-corrected); docs/precision_ladder.md gives the
    references."""
    a, b, c, d = (int(v) for v in (both, only_first, only_second, neither))
    n = a + b + c + d
    if n == 0:
        raise ValueError("no samples: the interval needs at least one")
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n, level)
    l2, u2 = wilson(a + c, n, level)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0
    if margins:
        cross = a * d - b * c
        # continuity-corrected phi: a positive correlation is shrunk by n/2, a negative one kept
        phi = (cross - n / 2) / math.sqrt(margins) if cross > n / 2 else min(cross, 0) / math.sqrt(margins)
    low = (p1 - p2) - math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    high = (p1 - p2) + math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    return p1 - p2, low, high


def paired_accuracy(labels, reference_pred, pred, level=0.95):
    """Accuracy of both on the same held-out samples and the change with its paired interval
    (Newcombe's, docs/precision_ladder.md says why). Predictions are class indices (n,) or outputs
    (n, classes), whose top-1 is taken. Returns

        {'accuracy', 'accuracy_ref', 'accuracy_change', 'accuracy_change_ci_low',
         'accuracy_change_ci_high', 'accuracy_n', 'accuracy_level', 'accuracy_method'}
    """
    labels = np.asarray(labels).astype(np.int64).ravel()
    ref, new = _top1(reference_pred), _top1(pred)
    if not len(labels) or ref.shape != labels.shape or new.shape != labels.shape:
        raise ValueError("%d labels, %d reference and %d rung predictions: give one of each per sample"
                         % (len(labels), len(ref), len(new)))
    right, ref_right = new == labels, ref == labels
    change, low, high = newcombe_paired((right & ref_right).sum(), (right & ~ref_right).sum(),
                                        (~right & ref_right).sum(), (~right & ~ref_right).sum(), level)
    return {"accuracy": float(right.mean()), "accuracy_ref": float(ref_right.mean()),
            "accuracy_change": float(change), "accuracy_change_ci_low": float(low),
            "accuracy_change_ci_high": float(high), "accuracy_n": int(len(labels)),
            "accuracy_level": level, "accuracy_method": METHOD}


def outputs_of(forward, data, ctx, batch_size=64):
    """The outputs (n, ...) float32 numpy of `forward` over `data` in batches of `batch_size`; the
    last batch padded to full size (with its first sample) and cut, so that a static-shape graph
    sees one shape."""
    import mxnet as mx
    out = []
    for start in range(0, len(data), batch_size):
        batch = data[start:start + batch_size]
        n = len(batch)
        if n < batch_size and len(data) > batch_size:
            batch = np.concatenate([batch, np.repeat(batch[:1], batch_size - n, axis=0)])
        result = forward(mx.nd.array(batch, ctx=ctx, dtype=batch.dtype))
        out.append(result.astype("float32").asnumpy()[:n])
    return np.concatenate(out)


def evaluate(rung, ctx, held_out, reference_outputs=None, batch_size=64, spec=None):
    """The rung's outputs on the held-out samples and the fields above against the reference
    (fp32 static) outputs; accuracy fields only when `held_out.labels` is not None.

    Returns {'outputs': (n, classes) numpy, 'evaluated_n': n} plus, with `reference_outputs`,
    `outputs_agree`'s fields and, with labels, `paired_accuracy`'s; with labels and no
    reference, 'accuracy' alone. The caller drops 'outputs' before it writes a record. `spec`:
    the rung's ModelSpec where the caller holds it (`ladder.load`)."""
    from . import ladder
    outputs = outputs_of(ladder.load(rung, ctx, spec), held_out.data, ctx, batch_size)
    fields = {"outputs": outputs, "evaluated_n": int(len(outputs))}
    if reference_outputs is not None:
        fields.update(outputs_agree(reference_outputs, outputs))
    if held_out.labels is not None:
        if reference_outputs is not None:
            fields.update(paired_accuracy(held_out.labels, reference_outputs, outputs))
        else:
            fields["accuracy"] = float((_top1(outputs) == np.asarray(held_out.labels).ravel()).mean())
    return fields


def evaluate_rungs(rungs, ctx, held_out, batch_size=64, spec=None):
    """Every built rung of `rungs` (`ladder.prepare`'s) on the held-out samples, against the
    reference rung (fp32 static) when it was built: `evaluate` of the reference first, then of
    each other rung with the reference's outputs. Returns (rungs, {name: fields}), the fields
    without 'outputs' (what a record takes); a rung that cannot answer here (it fails to load
    or to run) comes back with `error` set, one line, like one that could not be built. `spec`:
    the model's ModelSpec where the caller holds it (`ModelSource.model_spec`)."""
    from dataclasses import replace
    from .. import error_line
    from .ladder import REFERENCE
    reference, fields, out = None, {}, {}
    for rung in sorted(rungs, key=lambda r: r.name != REFERENCE):
        out[rung.name] = rung
        if rung.error:
            continue
        try:
            got = evaluate(rung, ctx, held_out, reference, batch_size, spec)
        except Exception as e:  # noqa: BLE001 (MXNet's and the model's: the rung is out, the others run)
            out[rung.name] = replace(rung, error="it failed on the held-out samples: %s: %s"
                                                 % (type(e).__name__, error_line(e)))
            continue
        outputs = got.pop("outputs")
        if rung.name == REFERENCE:
            reference = outputs
        fields[rung.name] = got
    return [out[r.name] for r in rungs], fields
