"""The API's policy rules (oslo.policy), under Masakari's names.

``list_rules`` is the ``oslo.policy.policies`` entry point the
oslopolicy tools and the documentation read. Each rule that guards a
route names it in its operations; recovery.api.policy routes a request to
its rule by them.
"""

import itertools
from collections.abc import Iterable

from oslo_policy import policy

from recovery.policies import base
from recovery.policies import fencing
from recovery.policies import hosts
from recovery.policies import metrics
from recovery.policies import notifications
from recovery.policies import segments


def list_rules() -> Iterable[policy.RuleDefault]:
    return itertools.chain(base.RULES, segments.RULES,
                           notifications.RULES, fencing.RULES, hosts.RULES,
                           metrics.RULES)
