"""Scenes and files: datasets (COLMAP, transforms.json, Blender, one image), images, PLY, the embedded scene."""
