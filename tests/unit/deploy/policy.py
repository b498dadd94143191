"""A ValidatingAdmissionPolicy of deploy/ evaluated as the API server evaluates it.

Its matchConditions, variables and validations (expression, message or messageExpression) are
read from the YAML and evaluated with a CEL interpreter (cel-python), with the bindings the API
server gives a policy: `object`, `oldObject` (null on CREATE), `request` and `variables`. So
the tests check the shipped text, not a copy of it.
"""

from pathlib import Path
from typing import Any

import celpy  # type: ignore[import-untyped]
import yaml
from celpy import celtypes

DEPLOY = Path(__file__).resolve().parents[3] / "deploy"
ENV = celpy.Environment()


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def _program(expression: str) -> Any:
    return ENV.program(ENV.compile(expression))


def _value(program: Any, activation: dict[str, Any], what: str) -> Any:
    value = program.evaluate(activation)
    assert not isinstance(value, celpy.CELEvalError), f"{what}: {value}"
    return value


class AdmissionPolicy:
    """The ValidatingAdmissionPolicy of one deploy/ file."""

    def __init__(self, path: Path) -> None:
        [self.document] = [d for d in documents(path) if d["kind"] == "ValidatingAdmissionPolicy"]
        [self.binding] = [
            d for d in documents(path) if d["kind"] == "ValidatingAdmissionPolicyBinding"
        ]
        spec = self.document["spec"]
        self._conditions = [_program(c["expression"]) for c in spec.get("matchConditions", [])]
        self._variables = [(v["name"], _program(v["expression"])) for v in spec["variables"]]
        self._validations = [
            (
                _program(v["expression"]),
                v.get("message", ""),
                _program(v["messageExpression"]) if "messageExpression" in v else None,
            )
            for v in spec["validations"]
        ]

    def evaluate(
        self, request: dict[str, Any], obj: Any, old: Any = None
    ) -> tuple[dict[str, Any], list[str]]:
        """(variables, messages of the validations that fail) for one admission request; no
        message when a match condition leaves the request alone."""
        activation: dict[str, Any] = {
            "object": celpy.json_to_cel(obj),
            "oldObject": celpy.json_to_cel(old),
            "request": celpy.json_to_cel(request),
        }
        for condition in self._conditions:
            if not _value(condition, activation, "matchCondition"):
                return {}, []
        variables: dict[Any, Any] = {}
        for name, program in self._variables:
            activation["variables"] = celtypes.MapType(variables)
            variables[celtypes.StringType(name)] = _value(program, activation, f"variable {name}")
        activation["variables"] = celtypes.MapType(variables)
        failed = []
        for program, message, message_program in self._validations:
            verdict = _value(program, activation, message or "validation")
            assert isinstance(verdict, celtypes.BoolType), f"{message}: evaluated to {verdict!r}"
            if not verdict:
                if message_program is not None:
                    message = str(_value(message_program, activation, "messageExpression"))
                failed.append(message)
        return {str(k): v for k, v in variables.items()}, failed
