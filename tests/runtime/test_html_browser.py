"""The HTML report of `cglint --runtime` for a module with two buggy Keras layers, opened in a real
headless Chromium (Debian's `chromium` and `chromium-driver`, which .ci/run installs) through
Selenium: both mismatches plotted, each finding with its own verdict, every image decoded by the
browser, and the line plot showing both curves (the PNG's pixels, read back through a canvas).
Skips only where no Chromium and chromedriver can be found."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from cglint.report.html import AUTODIFF_COLOUR, CUSTOM_COLOUR

LAYERS = '''"""Two activations with hand-written gradients, each in a Dense-like Keras layer."""
import keras
import tensorflow as tf


@tf.custom_gradient
def tan_activation(x):
    y = tf.math.tan(x)

    def grad(dy):
        return dy / tf.square(tf.math.cos(y))

    return y, grad


@tf.custom_gradient
def softsign(x):
    y = x / (1 + tf.abs(x))

    def grad(dy):
        return 1 / tf.square(1 + tf.abs(x))

    return y, grad


class TanDense(keras.layers.Layer):
    def __init__(self, units=8, **kwargs):
        super().__init__(**kwargs)
        self.dense = keras.layers.Dense(units)

    def call(self, x):
        return tan_activation(self.dense(x))


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
    """The premise, with TensorFlow alone: each layer's gradient differs from the true derivative."""
    import tensorflow as tf

    (tmp_path / "layers.py").write_text(LAYERS)
    monkeypatch.syspath_prepend(str(tmp_path))
    import layers

    x = tf.constant([[0.3, -0.7, 1.1], [0.5, 0.9, -0.2]])
    up = tf.constant(2.0, shape=x.shape)
    truth = {layers.tan_activation: up / tf.square(tf.cos(x)), layers.softsign: up / tf.square(1 + tf.abs(x))}
    for fn, right in truth.items():
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(x)
        got = tape.gradient(y, x, output_gradients=up)
        assert not np.allclose(got.numpy(), right.numpy(), rtol=1e-2), fn
    for layer in (layers.TanDense(), layers.SoftsignDense()):
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = layer(x)
        assert tape.gradient(y, x) is not None


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
        assert [r.find_element(By.TAG_NAME, "code").text for r in rows] == ["tan_activation", "softsign"]

        # Each finding carries its own verdict, saying its own symptom.
        said = {f.get_attribute("data-code"): f.find_element(By.CSS_SELECTOR, "td.runtime").text
                for f in driver.find_elements(By.CSS_SELECTOR, "#findings tr.finding")}
        assert set(said) == {"CG005", "CG009"}
        assert said["CG005"].startswith("confirmed: d/x off by") and "vs autodiff" in said["CG005"]
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
