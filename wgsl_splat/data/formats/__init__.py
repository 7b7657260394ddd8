"""The scene formats, one module each: ``FORMAT``, a :class:`~wgsl_splat.data.scene.SceneFormat`
(how to recognise a scene of the format, how to read it into
:class:`~wgsl_splat.data.scene.SceneParts`, what the user passes). A new format is a new module
here and its entry in :data:`~wgsl_splat.data.datasets.SCENE_FORMATS`."""
