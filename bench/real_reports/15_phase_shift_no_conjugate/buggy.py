"""A phase shift exp(i*phi) applied to a complex amplitude, with a custom gradient for phi.

Source: https://github.com/Budapest-Quantum-Computing-Group/piquasso/pull/216
Symptom: the pull request notes that for the phase-shift gradient "we must take its conjugate
when multiplying with the upstream due to Tensorflow implementations"; without it the
gradient for the real phase is wrong.
TF 2.21: accepted silently: with a complex upstream (the imaginary part is the loss) d/dphi has the
opposite sign of autodiff ([-0.81, -0.71] against [0.81, 0.71]); with a real upstream the two
agree, which is how the bug hides.
Class: conjugate
"""
import tensorflow as tf


@tf.custom_gradient
def phase_shift(phi, amp):
    rot = tf.exp(tf.complex(tf.zeros_like(phi), phi))
    out = rot * amp

    def grad(dy):
        dphi = tf.math.real(dy * 1j * out)  # missing conj(): should be dy * conj(i * out)
        damp = dy * tf.math.conj(rot)
        return dphi, damp

    return out, grad


phi = tf.constant([0.3, 1.1])
amp = tf.constant([1.0 + 0.5j, 0.2 - 0.7j], dtype=tf.complex64)
with tf.GradientTape() as tape:
    tape.watch(phi)
    y = tf.reduce_sum(tf.math.imag(phase_shift(phi, amp)))  # a complex upstream
print("d/dphi:", tape.gradient(y, phi).numpy())
