"""A phase shift exp(i*phi) applied to a complex amplitude, with the conjugate in the gradient.

Source: https://github.com/Budapest-Quantum-Computing-Group/piquasso/pull/216
Symptom: (fixed version) the upstream is multiplied by conj(d out / d phi) and the real part
taken, as the pull request's fix does; without the conjugate the phase gradient was wrong.
TF 2.21: d/dphi equal to autodiff of exp(i*phi) * amp.
Class: conjugate (fixed: expect match)
"""
import tensorflow as tf


@tf.custom_gradient
def phase_shift(phi, amp):
    rot = tf.exp(tf.complex(tf.zeros_like(phi), phi))
    out = rot * amp

    def grad(dy):
        dphi = tf.math.real(dy * tf.math.conj(1j * out))
        damp = dy * tf.math.conj(rot)
        return dphi, damp

    return out, grad


phi = tf.constant([0.3, 1.1])
amp = tf.constant([1.0 + 0.5j, 0.2 - 0.7j], dtype=tf.complex64)
with tf.GradientTape() as tape:
    tape.watch(phi)
    y = tf.reduce_sum(tf.math.imag(phase_shift(phi, amp)))  # a complex upstream
print("d/dphi:", tape.gradient(y, phi).numpy())
