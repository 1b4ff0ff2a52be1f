"""The HTML report of `cglint --runtime` for a module with two buggy Keras layers (one with two
bugs: a derivative at the output and a hard-coded variable order), opened in a real headless
Chromium (Debian's `chromium` and `chromium-driver`, which .ci/run installs) through Selenium:
both mismatches plotted, each finding with its own verdict, every image decoded by the browser,
and the line plot showing both curves (the PNG's pixels, read back through a canvas).
Skips only where no Chromium and chromedriver can be found."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from cglint.report.html import AUTODIFF_COLOUR, CUSTOM_COLOUR

LAYERS = '''"""Two Keras layers with hand-written gradients."""
import keras
import tensorflow as tf


class TanDense(keras.layers.Layer):
    """tan(x @ kernel + bias)."""

    def __init__(self, units=4, **kwargs):
        super().__init__(**kwargs)
        self.units = units

    def build(self, input_shape):
        self.kernel = self.add_weight(shape=(input_shape[-1], self.units), name="kernel")
        self.bias = self.add_weight(shape=(self.units,), initializer="zeros", name="bias")

    def call(self, x):
        @tf.custom_gradient
        def tan_dense(x):
            z = x @ self.kernel + self.bias
            y = tf.math.tan(z)

            def grad(dy, variables=None):
                dz = dy / tf.square(tf.math.cos(y))
                return dz @ tf.transpose(self.kernel), [tf.transpose(x) @ dz, tf.reduce_sum(dz, 0)]

            return y, grad

        return tan_dense(x)


@tf.custom_gradient
def softsign(x):
    y = x / (1 + tf.abs(x))

    def grad(dy):
        return 1 / tf.square(1 + tf.abs(x))

    return y, grad


class SoftsignDense(keras.layers.Layer):
    def __init__(self, units=8, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(units)

    def call(self, x):
        return softsign(self.dense(x))
'''

ENV = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}


def _browser() -> tuple[str, str] | None:
    binary = next(filter(None, map(shutil.which, ("chromium", "chromium-browser", "google-chrome"))), None)
    driver = shutil.which("chromedriver")
    return (binary, driver) if binary and driver else None


def test_both_layers_are_wrong_in_tensorflow(tmp_path, monkeypatch):
    """The premise, with TensorFlow alone: TanDense's gradient differs from autodiff of its formula
    (and its hard-coded variable order swaps the weights' gradients under tf.function, where
    `variables` comes sorted by name), SoftsignDense's gradient ignores the upstream."""
    import tensorflow as tf

    (tmp_path / "layers.py").write_text(LAYERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import layers

    x = tf.constant([[0.3, -0.7, 1.1], [0.5, 0.9, -0.2]])
    tan = layers.TanDense()
    tan(x)  # builds the weights

    def gradients(fn):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        return tape.gradient(y, x, output_gradients=tf.fill(y.shape, 2.0))

    custom = gradients(tan)
    truth = gradients(lambda v: tf.math.tan(v @ tan.kernel + tan.bias))
    assert not np.allclose(custom.numpy(), truth.numpy(), rtol=1e-2)

    @tf.function
    def weights_step():
        with tf.GradientTape() as tape:
            y = tan(x)
        return tape.gradient(y, tan.trainable_variables)

    # Silently: each weight gets the other's gradient (TensorFlow checks no shapes).
    got = [tuple(g.shape) for g in weights_step()]
    assert got == [tuple(tan.bias.shape), tuple(tan.kernel.shape)] != [tuple(v.shape) for v in tan.trainable_variables]

    custom = gradients(layers.softsign)
    truth = gradients(lambda v: v / (1 + tf.abs(v)))
    assert not np.allclose(custom.numpy(), truth.numpy(), rtol=1e-2)


@pytest.mark.skipif(_browser() is None, reason="no Chromium and chromedriver on this machine")
def test_report_in_headless_chromium(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    (tmp_path / "layers.py").write_text(LAYERS)
    run = subprocess.run([sys.executable, "-m", "cglint", "--isolated", "--no-cache", "--runtime", "layers.py",
                          "--output-format", "html", "--output-file", "report.html"],
                         cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=300)
    assert run.returncode == 1, run.stderr  # findings and failing runtime checks

    binary, driver_path = _browser()
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--user-data-dir={tmp_path / 'profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    try:
        driver.get((tmp_path / "report.html").as_uri())
        rows = driver.find_elements(By.CSS_SELECTOR, "#gradients tr.gradient")
        assert [r.get_attribute("data-verdict") for r in rows] == ["mismatch", "mismatch"]
        # named as the user reaches them: the closure built in the layer's `call`, the module's function
        assert [r.find_element(By.TAG_NAME, "code").text for r in rows] == ["TanDense.call.<locals>.tan_dense",
                                                                          "softsign"]

        # Each finding carries its own verdict, saying its own symptom: TanDense's wrong
        # derivative is confirmed apart from its (also wrong) variable order.
        said = {f.get_attribute("data-code"): f.find_element(By.CSS_SELECTOR, "td.runtime").text
                for f in driver.find_elements(By.CSS_SELECTOR, "#findings tr.finding")}
        assert set(said) == {"CG005", "CG006", "CG009"}
        assert said["CG005"].startswith("confirmed: d/x off by") and "apart from the variable order" in said["CG005"]
        assert said["CG006"].startswith("confirmed: gradients do not follow the order of variables")
        assert said["CG009"].startswith("confirmed: upstream gradient ignored")

        # Every image decoded by the browser, at a non-zero size.
        images = driver.find_elements(By.TAG_NAME, "img")
        assert len(images) == 4
        for img in images:
            w, h, done = driver.execute_script("const i = arguments[0]; return [i.naturalWidth, i.naturalHeight, i.complete];", img)
            assert done and w > 100 and h > 100

        for section in driver.find_elements(By.CSS_SELECTOR, "section.function"):
            assert section.get_attribute("data-verdict") == "mismatch"
            line = section.find_element(By.CSS_SELECTOR, "figure.line img")
            alt = line.get_attribute("alt")
            assert "custom gradient" in alt and "autodiff" in alt
            red, blue = _colour_pixels(driver, line)
            assert red > 300 and blue > 300, (red, blue)  # both curves, well beyond their legend swatches
            elements = section.find_element(By.CSS_SELECTOR, "figure.elements img")
            assert _colour_pixels(driver, elements) == (0, 0)  # the bar chart draws neither curve
    finally:
        driver.quit()


def _colour_pixels(driver, img) -> tuple[int, int]:
    """Pixels of the custom curve's and autodiff's colours in `img`, as the browser decoded it."""
    rgb = [tuple(int(c[i:i + 2], 16) for i in (1, 3, 5)) for c in (CUSTOM_COLOUR, AUTODIFF_COLOUR)]
    return tuple(driver.execute_script("""
        const [img, want] = arguments;
        const c = document.createElement('canvas');
        c.width = img.naturalWidth; c.height = img.naturalHeight;
        const g = c.getContext('2d'); g.drawImage(img, 0, 0);
        const d = g.getImageData(0, 0, c.width, c.height).data;
        let n = 0;
        for (let i = 0; i < d.length; i += 4)
            if (Math.abs(d[i] - want[0]) + Math.abs(d[i + 1] - want[1]) + Math.abs(d[i + 2] - want[2]) < 30) n++;
        return n;""", img, list(colour)) for colour in rgb)
