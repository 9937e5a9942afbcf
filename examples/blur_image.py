"""Blur and Sobel-filter scikit-image's bundled camera photograph with WAVE kernels.

Usage: python examples/blur_image.py [OUT.png]   (needs the demo extra: pip install '.[demo]')
"""

from __future__ import annotations

import sys

import numpy as np
from PIL import Image
from skimage import data

import anywave.kernels as K


def main() -> int:
    out = sys.argv[1] if len(sys.argv) > 1 else "camera_edges.png"
    img = data.camera().astype(np.float32)
    blurred = K.gaussian_blur5(img, K.gaussian_kernel5(1.5))
    edges = K.sobel_magnitude(blurred)
    edges = edges * (255.0 / max(float(np.percentile(edges, 99.5)), 1e-6))
    panel = np.hstack([np.clip(np.rint(a), 0, 255).astype(np.uint8) for a in (blurred, edges)])
    Image.fromarray(panel).save(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
