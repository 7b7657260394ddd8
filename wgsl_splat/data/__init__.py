"""Scenes and files: datasets (load_dataset; one module per format in formats/: COLMAP,
transforms.json, Blender, one image), images, PLY, the embedded scene."""
