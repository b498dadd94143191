"""The webhook's DRA mode (`POST /webhook/dra`): a GPU pod's `nvidia.com/gpu*` requests become
ResourceClaims made from templates in its namespace (`vgpu.domain.dra.translate_pod` decides
what they ask and how the pod changes), and this use case makes the templates exist first.

- The cluster's GPUs are read from the ResourceSlices of the driver, only for a pod whose
  claims depend on them (a memory percentage, a card type), at most every `cards_refresh`
  seconds.
- A template is made by get-or-create: an existing one is used when it asks what the pod
  asks (read back as the API stores it); a create that lost a race (Conflict) or whose answer
  was lost (a timeout) is followed by a read, so a retried admission never fails on what the
  first one did.
- When a template cannot be made or read, the pod is denied with the reason: admitted without
  its claim it would keep `nvidia.com/gpumem`, which no DRA node advertises, and stay Pending
  with no word of why. A dry run (`kubectl --dry-run=server`) makes nothing and answers the
  patch all the same.
"""

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from vgpu.domain import AdmissionDecision
from vgpu.domain.device import Device
from vgpu.domain.dra import (
    ClaimTemplate,
    DraAdmissionConfig,
    DraError,
    parse_resource_slice,
    published_cards,
    screen_dra_pod,
    translate_pod,
)
from vgpu.ports.cluster import ClusterError, Conflict, NotFound, Rejected
from vgpu.ports.dra import ClaimTemplatePort, DraReadPort

log = logging.getLogger(__name__)


class TemplateError(Exception):
    """A template cannot be made or read; the message says which and why."""


class ClusterCards:
    """The GPUs the ResourceSlices of `driver` publish, listed again once `refresh` seconds
    have passed since the last list. Thread-safe; ClusterError when the list fails."""

    def __init__(
        self,
        slices: DraReadPort,
        driver: str,
        refresh: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slices = slices
        self._driver = driver
        self._refresh = refresh
        self._clock = clock
        self._lock = threading.Lock()
        self._cards: list[Device] | None = None
        self._listed_at = 0.0
        self._unreadable: set[str] = set()

    def cards(self) -> list[Device]:
        with self._lock:
            now = self._clock()
            if self._cards is None or now - self._listed_at >= self._refresh:
                self._cards = published_cards(self._read(), self._driver)
                self._listed_at = now
            return self._cards

    def _read(self) -> list[Any]:
        found = []
        for document in self._slices.list_resource_slices():
            spec = document.get("spec")
            if not isinstance(spec, Mapping) or spec.get("driver") != self._driver:
                continue
            try:
                found.append(parse_resource_slice(document))
            except DraError as exc:
                if str(exc) not in self._unreadable:  # once per problem, not every list
                    self._unreadable.add(str(exc))
                    log.warning("DRA webhook: leaving out a ResourceSlice: %s", exc)
        return found


def ensure_template(port: ClaimTemplatePort, template: ClaimTemplate) -> None:
    """Make `template` exist as it is (see the module); TemplateError otherwise."""
    namespace, name = template.claim.namespace, template.claim.name
    what = f"ResourceClaimTemplate {template.key}"
    try:
        stored = port.get_claim_template(namespace, name)
        if stored is None:
            stored = _create(port, template)
    except NotFound as exc:
        raise TemplateError(
            f"cannot make {what}: {exc} (the API serves no resource.k8s.io/v1 "
            "ResourceClaimTemplates: DRA needs Kubernetes 1.34 or later)"
        ) from None
    except ClusterError as exc:
        raise TemplateError(f"cannot make {what}: {exc}") from None
    if stored is None:
        raise TemplateError(f"{what} was made and deleted again meanwhile; create the pod again")
    if not template.matches(stored):
        raise TemplateError(
            f"{what} exists and asks for something other than {template.description}: it "
            "is vgpu's name for that request, so delete it and create the pod again"
        )


def _create(port: ClaimTemplatePort, template: ClaimTemplate) -> dict[str, Any] | None:
    """The template as created, or as found after a create that lost a race or its answer."""
    try:
        created = port.create_claim_template(template.manifest())
    except Conflict:
        return port.get_claim_template(template.claim.namespace, template.claim.name)
    except Rejected:
        raise
    except ClusterError as exc:  # a timeout: the create may have happened
        found = port.get_claim_template(template.claim.namespace, template.claim.name)
        if found is None:
            raise exc from None
        return found
    log.info("made %s: %s", f"ResourceClaimTemplate {template.key}", template.description)
    return created


class DraAdmission:
    """The webhook's answer in DRA mode, with the templates made first."""

    def __init__(
        self, config: DraAdmissionConfig, cards: ClusterCards, templates: ClaimTemplatePort
    ) -> None:
        self._config = config
        self._cards = cards
        self._templates = templates

    def admit(
        self, manifest: Mapping[str, Any], namespace: str, dry_run: bool = False
    ) -> AdmissionDecision:
        """The answer for a pod being created in `namespace`; never raises for the pod's
        content or the API's failures (those deny the pod, naming why)."""
        screened = screen_dra_pod(manifest, namespace, self._config)
        if isinstance(screened, AdmissionDecision):
            return screened
        cards: list[Device] = []
        if screened.needs_cards:
            try:
                cards = self._cards.cards()
            except ClusterError as exc:
                return AdmissionDecision(
                    False,
                    "cannot read the cluster's GPUs (ResourceSlices of "
                    f"{self._config.driver}), which a memory percentage or a card type "
                    f"needs to be written as a claim: {exc}",
                )
        translated = translate_pod(screened, cards, self._config)
        if isinstance(translated, AdmissionDecision):
            return translated
        if not dry_run:
            for template in translated.templates:
                try:
                    ensure_template(self._templates, template)
                except TemplateError as exc:
                    return AdmissionDecision(False, str(exc))
        return translated.decision
