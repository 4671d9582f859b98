"""Sphinx configuration of recovery's documentation (``tox -e docs``).

Markdown pages (myst-parser) hold the prose, moved from the README as it
was written; the references are generated from the code: the options by
oslo.config's extension, the command line by ``doc/ext/cli.py`` from the
argument parsers. Nothing here reads git or the network, so a fresh
clone builds offline.
"""

import os
import sys

sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__),
                                                "..", "ext")))

project = "recovery"
copyright = "the recovery authors"
extensions = [
    "myst_parser",
    "oslo_config.sphinxext",
    "oslo_config.sphinxconfiggen",
    "oslo_policy.sphinxext",
    "oslo_policy.sphinxpolicygen",
    "cli",
    "opthelp",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
master_doc = "index"
exclude_patterns = ["_build"]
# Every heading down to ### is a target ([text](page.md#heading)), as
# GitHub made them in the README.
myst_heading_anchors = 3
myst_enable_extensions = ["deflist"]
# Links resolve to pages and headings only (oslo.config's domain fails on
# a target it does not hold).
myst_ref_domains = ["std"]
html_theme = "alabaster"
html_static_path = []
# The sample file, generated from the registered options at each build,
# beside the build's output (doc/build, which git ignores), not among the
# sources.
config_generator_config_file = "../../etc/oslo-config-generator/recovery.conf"
sample_config_basename = "../build/recovery"
# The policy reference and sample, the same way (recovery.policies).
policy_generator_config_file = (
    "../../etc/oslo-policy-generator/recovery-policy-generator.conf")
sample_policy_basename = "../build/recovery"
nitpicky = True
man_pages = [
    ("cli/recovery", "recovery",
     "recover the instances of failed Nova compute hosts",
     ["the recovery authors"], 1),
    ("cli/recovery-engine", "recovery-engine",
     "the notification API and the recovery engine of recovery",
     ["the recovery authors"], 1),
]
