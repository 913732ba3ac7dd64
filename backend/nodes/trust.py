"""What a node token may do: act as its own node.

A node token is bound to one node name when it is minted. Every node route checks that the
node it acts on is the token's own (which checkpoints it may report is the attempt
domain's rule: backend/jobs/checkpoint_trust.py).
"""

from __future__ import annotations

import logging
import re

from backend.auth.service import Principal

log = logging.getLogger(__name__)

_STEP_DIR = re.compile(r"^step-\d{1,18}$")
_ATTEMPT_DIR = re.compile(r"^attempt-\d{1,9}$")
MAX_PATH = 4096


class NotThisNode(PermissionError):
    """A node token used as another node (or a token bound to no node)."""


def acting_node(principal: Principal, claimed: str | None = None) -> str:
    """The node this token acts as; NotThisNode when it is unbound or `claimed` is another."""
    if principal.node is None:
        raise NotThisNode(
            "this node token is bound to no node: mint one with "
            "`trainboard token create --scope node --node NAME`"
        )
    if claimed is not None and claimed != principal.node:
        raise NotThisNode(f"this token acts as node {principal.node!r} only, not {claimed!r}")
    return principal.node
