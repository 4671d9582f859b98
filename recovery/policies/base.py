"""The rules the others refer to, with Masakari 22's names and check
strings: a policy file written for Masakari overrides them the same
way."""

from oslo_policy import policy

#: Masakari's prefix of its API's rules; recovery serves that API.
MASAKARI_API = "os_masakari_api"
#: The prefix of the rules of routes Masakari does not have.
RECOVERY_API = "recovery_api"

RULE_ADMIN_API = "rule:admin_api"

RULES = [
    policy.RuleDefault(
        "context_is_admin", "role:admin",
        description="Who is an administrator: the credentials for which "
                    "the is_admin:True check holds."),
    policy.RuleDefault(
        "admin_or_owner", "is_admin:True or project_id:%(project_id)s",
        description="An administrator, or a caller of the target's "
                    "project (kept as Masakari defines it, for policy "
                    "files that refer to it)."),
    policy.RuleDefault(
        "admin_api", "is_admin:True",
        description="An administrator: the default of every API rule."),
]


def admin_rule(name: str, description: str, method: str,
               path: str) -> policy.DocumentedRuleDefault:
    """A rule of one route, administrators only by default."""
    return policy.DocumentedRuleDefault(
        name=name, check_str=RULE_ADMIN_API, description=description,
        operations=[{"method": method, "path": path}])
