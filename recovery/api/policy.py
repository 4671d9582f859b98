"""oslo.policy on the API: which rule guards a request, whose credentials
it is checked against, and the 403 a denial gets.

The credentials come from the authentication ``[api] auth_strategy``
chose (recovery.api.auth puts them in the WSGI environ):

- ``keystone``: the token's, as keystonemiddleware vouched for them
  (user, project, domain or system scope, roles);
- ``token`` and ``noauth``: the operator's, who holds the ``admin`` role
  and no project. A policy file applies to them as to an admin's token.

``is_admin`` is the ``context_is_admin`` rule's verdict on them, as in
Masakari: its rules' ``is_admin:True`` checks read it.
"""

import logging
import re
import sys
from collections.abc import Sequence
from typing import Any

import webob
import webob.dec
from oslo_config import cfg
from oslo_context import context
from oslo_policy import policy

from recovery import conf as recovery_conf
from recovery import policies
from recovery.api import http
from recovery.policies import notifications

LOG = logging.getLogger(__name__)

#: The environ key recovery.api.auth puts the caller's credentials in.
CREDENTIALS = "recovery.credentials"
#: The environ key of the project whose owner's read a request is
#: (``owner_project``).
OWNER = "recovery.owner_project"
OPERATOR: dict[str, Any] = {"user_id": None, "project_id": None,
                            "system_scope": None, "roles": ["admin"]}
#: The environ key of who the caller is, for the record: the token's
#: user (recovery.api.auth puts it there).
CALLER = "recovery.caller"
#: Who the caller is when no Keystone token says (``noauth``).
ANYONE = "operator (noauth API)"
_PLACEHOLDER = re.compile(r"\{[^}]+\}")
# The oslopolicy tools' options, not recovery's.
_TOOL_OPTIONS = frozenset({"namespace", "output-file", "format"})


def keystone_credentials(environ: dict) -> dict[str, Any]:
    """What keystonemiddleware's headers say of the caller (never the
    token itself)."""
    return context.RequestContext.from_environ(environ).to_policy_values()


def _routes() -> dict[tuple[str, str], str]:
    """Each route's rule, from the operations the rules document: the
    method and the path with every ``{placeholder}`` as ``{}``."""
    return {(op["method"], _PLACEHOLDER.sub("{}", op["path"])): rule.name
            for rule in policies.list_rules()
            if isinstance(rule, policy.DocumentedRuleDefault)
            for op in rule.operations}


ROUTES = _routes()


def route_rule(method: str, resource: Sequence[str]) -> str | None:
    """The rule of ``method`` on ``resource``, the path's parts after
    ``/v1`` (every second one an id), or None for a route without one."""
    shape = "".join(f"/{part}" if n % 2 == 0 else "/{}"
                    for n, part in enumerate(resource))
    return ROUTES.get((method, shape))


class Policy:
    """The enforcer, and the one place a request is checked against
    it."""

    def __init__(self, enforcer: policy.Enforcer):
        self.enforcer = enforcer

    def authorize(self, req: webob.Request, rule: str | None) -> None:
        """Raise Refused(403), Masakari's answer, unless ``rule`` allows
        the request's caller, or it is one of the reads the owner's rule
        lets the caller's project make (``owner_project`` then says
        which); log the denial once, with the rule."""
        creds = dict(req.environ.get(CREDENTIALS, OPERATOR))
        if rule is not None:
            creds["is_admin"] = self.enforcer.authorize(
                "context_is_admin", creds, creds)
            if self._allows(rule, creds):
                return
            project = creds.get("project_id")
            if (rule in notifications.OWNER_READS and project
                    and self._allows(notifications.OWNER_READ, creds)):
                req.environ[OWNER] = project
                return
        LOG.warning("Refused %s %s: policy rule %s does not allow user %s "
                    "of project %s with roles %s", req.method,
                    req.path_info, rule, creds.get("user_id"),
                    creds.get("project_id"), creds.get("roles"))
        # A route without a rule is refused: no route is open by mistake.
        raise http.Refused(403, f"Policy doesn't allow {rule} to be "
                                f"performed.")

    def _allows(self, rule: str, creds: dict[str, Any]) -> bool:
        target = {"project_id": creds.get("project_id"),
                  "user_id": creds.get("user_id")}
        try:
            return bool(self.enforcer.authorize(rule, target, creds))
        except policy.InvalidScope:
            return False


def caller(req: webob.Request) -> str:
    """Who made the request, for the record (the actor of what it
    decides): the Keystone token's user, by name if it has one, else
    by id; the static token's holder; ``ANYONE`` without either."""
    return req.environ.get(CALLER) or ANYONE


def owner_project(req: webob.Request) -> str | None:
    """The project an owner's read is limited to; None for a caller
    whose own rule allowed the request (who sees everything)."""
    return req.environ.get(OWNER)


def enforcer(conf: cfg.ConfigOpts) -> policy.Enforcer:
    """The enforcer of ``[oslo_policy]`` (its policy_file and
    policy_dirs, looked for next to the config files), with recovery's
    rules as defaults; oslo.policy reloads a changed file by itself."""
    found = policy.Enforcer(conf)
    found.register_defaults(policies.list_rules())
    found.load_rules()
    return found


def from_conf(conf: cfg.ConfigOpts) -> Policy:
    return Policy(enforcer(conf))


def defaults() -> Policy:
    """The rules' defaults alone, no policy file looked for (an API
    built without a config)."""
    rules = list(policies.list_rules())
    found = policy.Enforcer(cfg.ConfigOpts(), use_conf=False,
                            rules=policy.Rules.from_dict(
                                {r.name: r.check_str for r in rules}))
    found.register_defaults(rules)
    return Policy(found)


class Gate:
    """A WSGI app behind one rule (``/metrics`` served with the API)."""

    def __init__(self, app: Any, checker: Policy, rule: str):
        self.app, self.checker, self.rule = app, checker, rule

    @webob.dec.wsgify
    def __call__(self, req: webob.Request) -> Any:
        try:
            self.checker.authorize(req, self.rule)
        except http.Refused as exc:
            return http.error(exc.status, exc.message)
        return req.get_response(self.app)


def get_enforcer() -> policy.Enforcer:
    """The ``oslo.policy.enforcer`` entry point of the oslopolicy tools:
    recovery's config files from the command line (``--config-file``,
    ``--config-dir``), without the tools' own options."""
    args, argv = [], iter(sys.argv[1:])
    for arg in argv:
        name, given, _ = arg.lstrip("-").partition("=")
        if name in _TOOL_OPTIONS:
            if not given:
                next(argv, None)
            continue
        args.append(arg)
    conf = cfg.ConfigOpts()
    recovery_conf.register_opts(conf)
    conf(args, project="recovery")
    return enforcer(conf)
