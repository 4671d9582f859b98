"""sushy-emulator with two test hooks; run by tests.bmc.redfish.

``python -m tests.bmc._sushy_emulator [--ignore-flag FILE] [--fast]
[--delay N] [--seed N] <sushy-emulator arguments>`` runs the real
emulator (fake driver) with:

- ``--ignore-flag FILE``: while FILE exists, power changes are accepted
  (HTTP 204, as a BMC that silently fails would) and never applied.
- ``--fast``: the fake driver applies a power change within 1 s instead
  of its random 1-11 s (it has no setting for that).
- ``--delay N``: within N s (more than N - 1), always.
- ``--seed N``: its random delays in the same order on every run.
- ``--health-file FILE``: while FILE exists, the System's Status Health
  is its text (OK, Warning, Critical), as a BMC reports a failing part.
"""

import argparse
import json
import os
import random
import sys
import types

from sushy_tools.emulator import main as emulator
from sushy_tools.emulator.resources.systems import fakedriver


def _ignore_power_changes_while(flag: str) -> None:
    apply = fakedriver.FakeDriver.set_power_state

    def set_power_state(self, identity, state):
        if os.path.exists(flag):
            return None
        return apply(self, identity, state)

    fakedriver.FakeDriver.set_power_state = set_power_state


def _health_from(path: str) -> None:
    """While ``path`` exists, the System's Status Health is its text."""
    render = emulator.app.render_template

    def render_template(name, /, **params):
        text = render(name, **params)
        if name != "system.json" or not os.path.exists(path):
            return text
        system = json.loads(text)
        with open(path) as health:
            system.setdefault("Status", {})["Health"] = health.read().strip()
        return json.dumps(system)

    emulator.app.render_template = render_template


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ignore-flag")
    parser.add_argument("--fast", action="store_true")
    parser.add_argument("--delay", type=int)
    parser.add_argument("--seed", type=int)
    parser.add_argument("--health-file")
    hooks, emulator_args = parser.parse_known_args()
    if hooks.ignore_flag:
        _ignore_power_changes_while(hooks.ignore_flag)
    if hooks.health_file:
        _health_from(hooks.health_file)
    # The delay is int(time.time()) + random.randint(1, 11).
    if hooks.fast:
        fakedriver.random = types.SimpleNamespace(randint=lambda low, _: low)
    elif hooks.delay:
        fakedriver.random = types.SimpleNamespace(
            randint=lambda *_: hooks.delay)
    elif hooks.seed is not None:
        fakedriver.random = random.Random(hooks.seed)
    sys.argv = [sys.argv[0], *emulator_args]
    return emulator.main()


if __name__ == "__main__":
    sys.exit(main())
