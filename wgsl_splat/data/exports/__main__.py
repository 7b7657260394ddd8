"""``python -m wgsl_splat.data.exports``: the formats table of docs/exports.md."""

from . import format_table

print(format_table())
