"""The WGSL sources, installed as the package ``wgsl_splat.shaders`` (pyproject.toml maps this
folder there). This file makes it a regular package so that ``importlib.resources`` finds it the
same way in a wheel, a plain install and an editable install."""
