"""Sphinx configuration of the API reference (``tox -e api-ref``).

os-api-ref's directives (``rest_method``, ``rest_parameters``) with
Sphinx's default theme: nothing here reads git or the network.
"""

extensions = ["os_api_ref", "myst_parser"]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
project = "recovery API reference"
copyright = "the recovery authors"
master_doc = "index"
exclude_patterns = ["_build"]
html_theme = "alabaster"
myst_heading_anchors = 3
myst_ref_domains = ["std"]
nitpicky = True
