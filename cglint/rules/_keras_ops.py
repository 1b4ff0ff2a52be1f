"""Which rules check Keras 3's `keras.ops.custom_gradient` sites, and why.

On the TensorFlow backend `keras.ops.custom_gradient(f)` is `tf.custom_gradient(f=f)`
(keras/src/backend/tensorflow/core.py): TensorFlow calls the grad fn `grad(*upstreams)` (so the
Keras convention `grad(*args, upstream=None)` receives them in `args`), counts flattened
positional inputs, converts every positional argument to a tensor and asks for `variables` when
the forward reads trainable variables, exactly as for `tf.custom_gradient`. Checked with
TensorFlow 2.21 + Keras 3.15: a forward reading a Keras weight raises "grad_fn must accept keyword
argument 'variables'", one gradient for two inputs raises "expected to return 2 gradients",
`f(x, 2)` raises the int32/float32 mismatch under tf.function.

A rule listed here checks those sites too; `Rule.documentation()` prints its sentence. A rule
not listed skips them (so a new rule opts in once its behaviour is checked on the backend)."""

KERAS_OPS = {
    "CG001": "`tf.function` inside the forward retraces on every call there as well.",
    "CG002": "a forward reading trainable variables must return `(input_grads, var_grads)` there too.",
    "CG003": "TensorFlow needs the variable-gradient list there too (it calls `len()` on it).",
    "CG004": "a forward reading a Keras weight raises \"grad_fn must accept keyword argument 'variables'\" there "
             "too; the Keras convention `grad(*args, upstream=None)` takes no `variables`.",
    "CG005": "the derivative is the same mathematics on every backend.",
    "CG006": "`variables` comes from TensorFlow in the same order there.",
    "CG007": "TensorFlow counts the flattened positional inputs the same way (verified: one gradient for two "
             "inputs raises 'expected to return 2 gradients').",
    "CG008": "TensorFlow calls the grad fn with one positional upstream per flattened output; `*args` (the Keras "
             "convention) is never flagged.",
    "CG009": "the upstream arrives positionally in `args` (not as `upstream=`) on that backend.",
    "CG010": "keyword arguments raise under tf.function there too.",
    "CG011": "a variable created in the forward is created on every call there too.",
    "CG012": "NumPy on a symbolic tensor fails under tf.function (model.fit) on that backend.",
    "CG014": "`variables` holds the backing tf.Variable, not the Keras weight, there too.",
    "CG016": "TensorFlow accepts a gradient of another dtype there too (verified: a float16 gradient for a "
             "float32 input fails in the gradient of the op that made it, 'expected to be a half tensor').",
    "CG015": "the positional arguments are converted to tensors the same way (verified: `f(x, 2)` raises the "
             "int32/float32 mismatch under tf.function).",
}
