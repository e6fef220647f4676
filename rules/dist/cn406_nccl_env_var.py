"""CN406: ``NCCL_*`` environment variables do not apply on Trainium."""

from __future__ import annotations

import libcst as cst

from cuda2neuron.core import Effort, Invalid, Rule

from ._helpers import env_site

__all__ = ["NcclEnvVar"]

# TORCH_NCCL_* (async error handling, blocking wait, ...) are ProcessGroupNCCL's own knobs.
_PREFIXES = ("NCCL_", "TORCH_NCCL_")
_GUIDANCE = (
    "NCCL_* variables configure NVIDIA's collective library and are ignored by the neuron "
    "process-group backend, which configures its own collectives (multi-node traffic goes over "
    "EFA; see the Neuron runtime configuration guide). Remove the setting, or keep it only on "
    "the CUDA code path."
)


def _is_nccl_key(value: object) -> bool:
    return isinstance(value, str) and value.startswith(_PREFIXES) and value.replace("_", "").isalnum()


class NcclEnvVar(Rule):
    """
    ## What it does
    Reports ``NCCL_*`` and ``TORCH_NCCL_*`` environment variables that the code sets or reads.

    Covered:
    ``os.environ["NCCL_DEBUG"] = "INFO"``, ``os.environ.setdefault("NCCL_P2P_DISABLE", "1")``,
    ``os.putenv``, ``os.environ.get(...)``, env dicts and ``update(NCCL_...=...)``, and a key
    bound to a name first (``key, value = "NCCL_DEBUG", "INFO"``).

    ## Why is this bad?
    These variables tune NVIDIA's NCCL library. On Trainium the ``neuron`` process-group backend
    does its own collective setup, so the settings silently do nothing: debugging output the user
    expects never appears, and workarounds (``NCCL_P2P_DISABLE``, socket interfaces, timeouts via
    ``TORCH_NCCL_BLOCKING_WAIT``) no longer apply.

    ## Example
    ```python
    os.environ["NCCL_DEBUG"] = "INFO"
    ```
    is reported with guidance: remove it, or keep it on the CUDA path only.

    ## Fix safety
    Display only (no fix): whether the setting is still wanted on a CUDA path, or has a Neuron
    counterpart, is a decision for the user.
    """

    code = "CN406"
    name = "nccl-env-var"
    triggers = ("NCCL_",)
    VALID = (
        'print("set NCCL_DEBUG=INFO to debug hangs")\n',
        'KEYS = ["NCCL_DEBUG"]\n',
        'key, doc = "NCCL_DEBUG is not set", "x"\n',  # prose, not a key
        'obj.key = "NCCL_DEBUG"\n',  # an attribute of some object: unknown use
        'os.environ["NEURON_RT_LOG_LEVEL"] = "INFO"\n',
        "# os.environ['NCCL_DEBUG'] = 'INFO'\n",
    )
    INVALID = (
        Invalid('import os\nos.environ["NCCL_DEBUG"] = "INFO"\n'),
        Invalid('import os\nos.environ.setdefault("NCCL_P2P_DISABLE", "1")\n'),
        Invalid('import os\nos.putenv("NCCL_SOCKET_IFNAME", "eth0")\n'),
        Invalid('import os\nlevel = os.environ.get("NCCL_DEBUG")\n'),
        Invalid('import os\nos.environ["TORCH_NCCL_ASYNC_ERROR_HANDLING"] = "1"\n'),
        Invalid('import os\nos.environ.update(NCCL_IB_DISABLE="1")\n'),
        Invalid('env = dict(os.environ, **{"NCCL_DEBUG": "WARN"})\n'),
        # The key reaches os.environ through a name (dinov2's distributed setup).
        Invalid('import os\nkey, value = "NCCL_ASYNC_ERROR_HANDLING", "1"\nos.environ[key] = value\n'),
        Invalid('DEBUG_KEY = "NCCL_DEBUG"\n'),
        Invalid('import os\nos.environ["NCCL_DEBUG"] = "INFO"\n', target="accelerator"),
    )

    def visit_SimpleString(self, node: cst.SimpleString) -> None:
        if "NCCL_" not in node.value or "b" in node.prefix.lower() or not _is_nccl_key(node.evaluated_value):
            return
        if env_site(self, node) is not None or self._bound_to_name(node):
            self._report(node, str(node.evaluated_value))

    def _bound_to_name(self, node: cst.SimpleString) -> bool:
        """``KEY = "NCCL_X"`` / ``key, value = "NCCL_X", "1"``: the key is set through a name.

        A whole ``NCCL_*`` identifier bound to a plain name has no other use than naming the
        variable (dinov2 sets ``os.environ[key]`` after such an unpacking); a list of such names
        or a log line is not a setting.
        """
        anc = self.context.ancestors
        parent = anc[-1] if anc else None
        if isinstance(parent, cst.Assign):
            return parent.value is node and all(isinstance(t.target, cst.Name) for t in parent.targets)
        if isinstance(parent, cst.Element) and len(anc) >= 3 and isinstance(anc[-2], cst.Tuple):
            assign, values = anc[-3], anc[-2]
            if not isinstance(assign, cst.Assign) or assign.value is not values or len(assign.targets) != 1:
                return False
            names = assign.targets[0].target
            if not isinstance(names, cst.Tuple) or len(names.elements) != len(values.elements):
                return False
            position = next(i for i, e in enumerate(values.elements) if e is parent)
            return isinstance(names.elements[position].value, cst.Name)
        return False

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None and _is_nccl_key(node.keyword.value):
            # the keyword is the key: update(NCCL_X=...), dict(NCCL_X=...)
            self._report(node.keyword, node.keyword.value, (*self.context.ancestors, node))

    def _report(self, node: cst.CSTNode, key: str, chain: tuple[cst.CSTNode, ...] | None = None) -> None:
        self.report(
            node,
            f"`{key}` is an NCCL setting; it has no effect with the neuron process-group backend",
            ancestors=tuple(self.context.ancestors) if chain is None else chain,
            guidance=_GUIDANCE,
            effort=Effort.LOW,
        )
