"""`python bench/heldout.py --corpus fixtures/heldout2 --verify`: every label of
fixtures/heldout2/LABELS.toml checked with TensorFlow 2.21 + Keras 3, independently of cglint.
Each check returns its evidence or raises (a label TensorFlow does not confirm)."""

import heldout as h

h.load_tf()
np, tf, keras = h.np, h.tf, h.keras
_rand, _grads, _close, _same_grads, _different_grads, _raises, _built = (
    h._rand, h._grads, h._close, h._same_grads, h._different_grads, h._raises, h._built)
_BROKEN = (AttributeError, NotImplementedError, TypeError, ValueError, tf.errors.InvalidArgumentError)


def _complex(*shape, seed=0):
    return tf.complex(_rand(*shape, seed=seed), _rand(*shape, seed=seed + 11))


def _fit(model, features=6, outputs=1):
    x, y = _rand(8, features, seed=3), _rand(8, outputs, seed=4)
    return model.fit(x, y, epochs=1, batch_size=4, verbose=0).history["loss"][-1]


# ---- buggy ----------------------------------------------------------------------------------


def check_activations_registry(m):
    x = _rand(4, 5) * 2.0
    gap = max(_same_grads(m.get("elu"), tf.nn.elu, [x]),
              _same_grads(m.get("squareplus"), lambda x: 0.5 * (x + tf.sqrt(x * x + 4.0)), [x]))
    return "selu " + _different_grads(m.get("selu"), tf.nn.selu, [x]) + f"; elu, squareplus match (gap {gap:.1e})"


def check_attention_pkg(m):
    scores = _rand(2, 3, 5)
    ev = "attention_probs " + _different_grads(m.attention_probs, lambda s: tf.nn.softmax(s, -1), [scores])
    layer, x = _built(m.DotProductAttention(4), 2, 3, 6)
    _grads(layer, [x], layer.trainable_variables)  # the layer trains, on the wrong gradient
    return ev


def check_bias_act(m):
    x, b = _rand(4, 3), _rand(3, seed=2)

    def ref(x, b):
        pre = x + b
        return tf.where(pre >= 0.0, pre, 0.2 * pre) * 2.0 ** 0.5

    ev = _different_grads(m.fused_bias_leaky, ref, [x, b])
    model = keras.Sequential([keras.Input((6,)), m.FusedDense(3)])
    model.compile("sgd", "mse")
    return ev + "; fit: " + _raises(lambda: _fit(model, outputs=3), ValueError, tf.errors.InvalidArgumentError)


def check_compiled_ops(m):
    return _raises(lambda: _grads(m.gelu_tanh, [_rand(3, 4)]), TypeError)


def check_complex_mixer(m):
    s, r = _complex(3, 4), _complex(3, 4, seed=5)
    return _different_grads(m.spectral_filter, lambda s, r: s * r, [s, r]) + " (the conjugate is missing)"


def check_dann_module(m):
    x = _rand(4, 6)
    return _raises(lambda: _grads(m.reverse_gradient, [x, tf.constant(0.5)]), ValueError)


def check_distributed_affine(m):
    layer, x = _built(m.ChannelAffine(), 3, 4)
    layer.gain.assign(_rand(4, seed=2) + 1.0)
    layer.bias.assign(_rand(4, seed=3))
    ref = lambda x: x * layer.gain + layer.bias  # noqa: E731
    # under tf.function `variables` is sorted by name (bias before gain); the grad fn returns gain first
    return "under tf.function " + _different_grads(tf.function(lambda x: layer(x)), ref, [x], [layer.gain, layer.bias])


def check_gather_pkg(m):
    table, ids = _rand(5, 3), tf.constant([[0, 1], [1, 4]])  # id 1 twice
    u = _rand(2, 2, 3, seed=7)
    got, want = [], []
    for fn, out in ((m.lookup, got), (tf.gather, want)):
        with tf.GradientTape() as tape:
            tape.watch(table)
            y = fn(table, ids)
        out.append(tf.convert_to_tensor(tape.gradient(y, table, output_gradients=u)))
    assert not _close(got[0], want[0]), "same gradient"
    bad = np.where(~np.isclose(got[0], want[0]).all(-1))[0].tolist()
    return f"table rows {bad} differ from autodiff (a repeated id keeps one upstream row, not their sum)"


def check_grad_clip_layer(m):
    layer = m.GradientNormClip(max_norm=0.5)
    return _raises(lambda: _grads(layer, [_rand(4, 6)]), ValueError)


def check_keras_ops_logsumexp(m):
    err = _raises(lambda: _grads(m.logsumexp_last, [_rand(4, 6)]), tf.errors.InvalidArgumentError, ValueError)
    square = _rand(5, 5)  # batch == items: the broadcast goes through, silently wrong
    return err + "; square input: " + _different_grads(m.logsumexp_last, lambda x: tf.reduce_logsumexp(x, -1), [square])


def check_log1mexp(m):
    x = _rand(3, 4, low=0.05, high=4.0)
    return _different_grads(m.log1mexp, lambda x: tf.math.log(1.0 - tf.exp(-x)), [x]) + " (opposite sign)"


def check_mp_rmsnorm(m):
    x16 = tf.cast(_rand(4, 6), tf.float16)
    _, (g,), _ = _grads(m.rms_normalize, [x16])
    assert g.dtype == tf.float32
    return "float16 input gets a float32 gradient; fit: " + _raises(lambda: _fit(m.build_model()), TypeError)


def check_percentile_clip_model(m):
    model = m.RobustRegressor()
    x = _rand(8, 6)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x)))
    assert all(g is not None for g in tape.gradient(loss, model.trainable_variables))  # eagerly fine
    model.compile(optimizer="sgd")
    return "eager runs; fit: " + _raises(lambda: _fit(model), *_BROKEN)


def check_pointer_attention(m):
    layer = m.PointerAttention(4)
    q, mem = _rand(2, 6), _rand(2, 3, 6, seed=2)
    layer.build(q.shape)
    with tf.GradientTape() as tape:
        tape.watch([q, mem])
        context, _weights = layer(q, mem)
    return _raises(lambda: tape.gradient(context, [q, mem]), TypeError)


def check_softplus_regressor(m):
    z = tf.concat([_rand(3, 4) * 3.0, _rand(1, 4) + 100.0], 0)  # unscaled features reach 100
    _, (g,), _ = _grads(m.softplus_link, [z])
    assert np.isnan(g.numpy()).any()
    return _different_grads(m.softplus_link, tf.nn.softplus, [z]) + " (NaN where exp(z) overflows)"


def check_ste_factory(m):
    x = _rand(4, 5) * 1.5
    return _different_grads(m.binarize, lambda x: tf.clip_by_value(x, -1.0, 1.0), [x]) + " (|x| > 1 not zeroed)"


def _graph_dx(m, quantize):
    """d loss/dx of the module's graph (m.build_graph) and of the same graph with `quantize` in
    place of the module's quantiser, the weights shared: the override against its reference."""
    graph, x, _, dx = m.build_graph()
    feed = _rand(4, 6).numpy()
    ref_graph = tf.Graph()
    with ref_graph.as_default():
        rx = tf.compat.v1.placeholder(tf.float32, [4, 6])
        rw = tf.compat.v1.get_variable("w", [6, 3], initializer=tf.compat.v1.glorot_uniform_initializer())
        rdx = tf.gradients(tf.reduce_sum(tf.square(tf.matmul(quantize(rx), rw))), rx)[0]
    with tf.compat.v1.Session(graph=graph) as s:
        s.run(tf.compat.v1.global_variables_initializer())
        w = s.run(graph.get_collection("variables")[0])
        got = s.run(dx, {x: feed})
    with tf.compat.v1.Session(graph=ref_graph) as s:
        s.run(rw.assign(w))
        return got, s.run(rdx, {rx: feed})


def _straight_through(fn, x):
    """fn(x) forward, the identity's gradient backward."""
    return x + tf.stop_gradient(fn(x) - x)


def check_straight_floor_graph(m):
    got, want = _graph_dx(m, lambda x: _straight_through(lambda x: tf.floor(x * 16.0) / 16.0, x))
    assert not np.allclose(got, want)
    return f"dx {got[0, :2]} vs straight-through {want[0, :2]} (the upstream is dropped)"


def check_temperature_module(m):
    d = m.Distiller()
    return _raises(lambda: _grads(lambda s: d.loss(s, _rand(4, 5, seed=9)), [_rand(4, 5)], [d.log_t]), TypeError)


def check_adaptive_clip(m):
    net, x = m.Net(), _rand(4, 6)
    for _ in range(2):
        _grads(net, [x], [net.w])
    assert not any("grad_norm" in v.name for v in net.variables), "the running norm is kept"
    return "eagerly a new running-norm variable per call; under tf.function " + _raises(
        lambda: m.train_step(m.Net(), x, tf.zeros([4, 1])), ValueError)


def check_ragged_pool(m):
    values, splits = _rand(8, 3), tf.constant([0, 3, 4, 8], tf.int64)

    def ref(values):
        return tf.reduce_mean(tf.RaggedTensor.from_row_splits(values, splits), axis=1)

    return _different_grads(lambda v: m.ragged_row_mean(v, splits), ref, [values]) + " (divided by 8 tokens, not 3/1/4)"


# ---- correct --------------------------------------------------------------------------------


def check_complex_power(m):
    z = _complex(3, 4)
    gap = _same_grads(m.power, lambda z: tf.math.real(z * tf.math.conj(z)), [z])
    return f"matches autodiff (2 z, not 2 conj z; gap {gap:.1e})"


def check_frozen_stats_norm(m):
    layer, x = _built(m.FrozenStatsNorm(), 3, 4)
    layer.mean.assign(_rand(4, seed=2))
    layer.var.assign(_rand(4, low=0.5, high=2.0, seed=3))
    ref = lambda x: (x - layer.mean) * tf.math.rsqrt(layer.var + 1e-3)  # noqa: E731
    gap = max(_same_grads(layer, ref, [x]), _same_grads(tf.function(lambda x: layer(x)), ref, [x]))
    return f"matches autodiff eagerly and under tf.function, no `variables` needed (gap {gap:.1e})"


def check_keras_ops_swish(m):
    x = _rand(4, 5) * 3.0
    gap = _same_grads(m.swish, lambda x: x * tf.sigmoid(x), [x])
    model = m.SwishMLP()
    model.compile(optimizer="sgd")
    model(tf.zeros([1, 6]))  # creates the weights
    before = [w.numpy().copy() for w in model.trainable_weights]
    _fit(model)  # (Keras 3 logs 0 for a loss the custom train_step returns untracked)
    moved = sum(not np.allclose(b, w.numpy()) for b, w in zip(before, model.trainable_weights))
    assert before and moved == len(before)
    return f"matches autodiff (gap {gap:.1e}); fit with the custom train_step updates all {moved} weights"


def check_module_variables(m):
    adapter, x = m.LowRankAdapter(4), _rand(3, 4)
    ref = lambda x: x + tf.matmul(tf.matmul(x, adapter.down), adapter.up)  # noqa: E731
    src = [adapter.down, adapter.up]
    gap = max(_same_grads(adapter, ref, [x], src), _same_grads(tf.function(lambda x: adapter(x)), ref, [x], src))
    return f"d/x, d/down, d/up match autodiff eagerly and under tf.function (gap {gap:.1e})"


def check_recompute_ffn(m):
    ff, x = m.FeedForward(4, 8), _rand(3, 4)
    ref = lambda x: x + tf.matmul(tf.nn.gelu(tf.matmul(x, ff.w1), approximate=False), ff.w2)  # noqa: E731
    gap = _same_grads(ff, ref, [x], [ff.w1, ff.w2])
    return f"d/x, d/w1, d/w2 match autodiff through tf.recompute_grad (gap {gap:.1e})"


def check_reversal_schedule(m):
    x = _rand(3, 4)
    _, (g, gs), u = _grads(m.flip_gradient, [x, tf.constant(0.3)])
    assert _close(g, -0.3 * u) and gs is None
    model = m.Debiaser(6)
    loss = m.train_step(model, _rand(4, 6), tf.ones([4, 1]), tf.constant(0.3))
    return f"d/x = -strength * upstream, None for the strength; train_step runs (loss {float(loss):.2f})"


def check_round_override_graph(m):
    got, want = _graph_dx(m, lambda x: _straight_through(tf.round, tf.clip_by_value(tf.sigmoid(x), 0.0, 1.0) * 15.0) / 15.0)
    assert np.allclose(got, want, rtol=1e-4, atol=1e-5) and np.abs(got).max() > 0
    return f"dx equals the straight-through reference (max gap {np.abs(got - want).max():.1e})"


def check_safe_norm(m):
    x = _rand(3, 4)
    gap = _same_grads(m.safe_norm, lambda x: tf.norm(x, axis=-1), [x])
    zero = tf.zeros([2, 4])
    _, (g,), _ = _grads(m.safe_norm, [zero])
    _, (ga,), _ = _grads(lambda x: tf.sqrt(tf.reduce_sum(x * x, -1)), [zero])
    assert np.all(g.numpy() == 0) and np.isnan(ga.numpy()).all()
    return f"matches autodiff off zero (gap {gap:.1e}); 0 at the zero vector where autodiff gives NaN"


def check_stable_link(m):
    x = tf.concat([_rand(3, 4) * 3.0, _rand(1, 4) + 100.0, _rand(1, 4) - 100.0], 0)
    gap = max(_same_grads(m.softplus, tf.nn.softplus, [x]),
              _same_grads(m.logsumexp, lambda x: tf.reduce_logsumexp(x, -1), [x]))
    return f"softplus and logsumexp match autodiff, |x| up to 100 included (gap {gap:.1e})"


def check_byol_target(m):
    a, b = _rand(4, 5), _rand(4, 5, seed=3)
    gap = _same_grads(lambda a: m.byol_loss(a, b), lambda a: m.byol_loss(a, tf.stop_gradient(b)), [a])
    _, (ga, gb), _ = _grads(m.byol_loss, [a, b])
    assert float(tf.reduce_max(tf.abs(gb))) == 0.0 and float(tf.reduce_max(tf.abs(ga))) > 0.0
    return f"online gradient equals autodiff with tf.stop_gradient on the target (gap {gap:.1e}); target's is 0"
