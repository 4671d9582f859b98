"""Sphinx configuration of the release notes (``tox -e releasenotes``):
reno's extension reads the notes from the git history, offline."""

extensions = ["reno.sphinxext"]
project = "recovery release notes"
copyright = "the recovery authors"
master_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
nitpicky = True
