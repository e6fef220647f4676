"""CN762: ``nvidia.com/gpu`` resources, node selectors and tolerations in Kubernetes manifests."""

from __future__ import annotations

from cuda2neuron.core import Effort, Invalid, TextReport, Valid

from .._helpers import TextRule
from ._helpers import INFRA_KINDS

__all__ = ["KubernetesGpuResource"]


_POD = "k8s/train-job.yaml"
_GUIDANCE = (
    "request the Neuron device plugin's resources instead: `aws.amazon.com/neuroncore` (NeuronCores) or "
    "`aws.amazon.com/neuron` (whole Neuron devices), and schedule on Trainium nodes "
    "(`node.kubernetes.io/instance-type: trn2.48xlarge`)"
)


class KubernetesGpuResource(TextRule):
    """
    ## What it does
    Reports NVIDIA GPU resources in Kubernetes manifests (and Helm values, Kubeflow / Volcano
    job specs): ``nvidia.com/gpu`` in ``resources.limits`` / ``requests``, node selectors and
    affinities on NVIDIA labels (``nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB``) and
    tolerations for the ``nvidia.com/gpu`` taint.

    ## Why is this bad?
    No Trainium node advertises ``nvidia.com/gpu``: the pod stays Pending. The Neuron device
    plugin registers ``aws.amazon.com/neuroncore`` (NeuronCores) and ``aws.amazon.com/neuron``
    (whole devices) instead.

    ## Example
    ```yaml
    resources:
      limits:
        nvidia.com/gpu: 8
    ```
    is reported: request ``aws.amazon.com/neuroncore`` (or ``aws.amazon.com/neuron``).

    ## Fix safety
    Report only: a GPU count is not a NeuronCore count, so the number has to be chosen anew.
    """

    code = "CN762"
    name = "kubernetes-gpu-resource"
    file_kinds = INFRA_KINDS
    triggers = ("nvidia.com/",)
    VALID = (
        Valid("resources:\n  limits:\n    aws.amazon.com/neuroncore: 32\n", path=_POD),
        Valid("# resources:\n#   limits:\n#     nvidia.com/gpu: 1\n", path=_POD),
    )
    INVALID = (
        Invalid("spec:\n  containers:\n  - name: t\n    resources:\n      limits:\n        nvidia.com/gpu: 8\n", path=_POD),
        Invalid("nodeSelector:\n  nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB\n", path=_POD),
        Invalid("tolerations:\n- key: nvidia.com/gpu\n  operator: Exists\n", path=_POD),
        Invalid('{"resources": {"limits": {"nvidia.com/gpu": "1"}}}\n', path="k8s/pod.json"),
    )

    @classmethod
    def check_text(cls, doc, settings) -> list[TextReport]:
        raw = doc.raw
        if "nvidia.com/" not in raw:
            return []
        out = []
        seen: set[int] = set()
        for (_document, path), (start, end) in doc.keys.items():
            name = path[-1]
            if not isinstance(name, str) or not name.startswith("nvidia.com/"):
                continue
            value = doc.at(_document, path)
            what = "requests NVIDIA GPUs" if name == "nvidia.com/gpu" else "selects nodes by an NVIDIA label"
            out.append(TextReport(
                start, value.end if value is not None else end, f"`{name}` {what}",
                guidance=_GUIDANCE, effort=Effort.LOW,
            ))
            seen.add(start)
        for s in doc.scalars:
            if s.value.startswith("nvidia.com/") and s.start not in seen:
                out.append(TextReport(
                    s.start, s.end, f"`{s.value}` names an NVIDIA GPU resource or label",
                    guidance=_GUIDANCE, effort=Effort.LOW,
                ))
        return out
