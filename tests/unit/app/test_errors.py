"""Validation errors in words: the field, the problem, the value and where it came from."""

import pytest
from pydantic import BaseModel, Field, ValidationError, model_validator

from vgpu.app.errors import field_path, listed_problems, one_line_problems, problems


class Card(BaseModel):
    memory: int = Field(gt=0)


class Node(BaseModel):
    name: str
    cards: list[Card] = []
    low: int = 0
    high: int = 0

    @model_validator(mode="after")
    def _ordered(self) -> "Node":
        if self.low > self.high:
            raise ValueError(f"low={self.low} is above high={self.high}")
        return self


def error(model: type[BaseModel], data: object) -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(data)
    return caught.value


def test_each_problem_names_the_path_with_list_indexes_and_the_value() -> None:
    exc = error(Node, {"name": "n", "cards": [{"memory": 1}, {"memory": -5}]})
    assert problems(exc) == ["cards[1].memory: Input should be greater than 0 (got -5)"]


def test_a_missing_field_shows_no_value_and_a_rule_across_fields_only_its_message() -> None:
    assert problems(error(Node, {})) == ["name: Field required"]
    assert problems(error(Node, {"name": "n", "low": 2, "high": 1})) == ["low=2 is above high=1"]


def test_the_source_and_prefix_are_added_and_long_values_cut() -> None:
    exc = error(Node, {"name": 5, "cards": "c" * 200})
    line = one_line_problems(exc, "field ", lambda loc: f"SRC-{loc[0]}")
    assert "field name: Input should be a valid string (got 5) [from SRC-name]" in line
    cards = line.split("; ")[1]
    assert cards.startswith("field cards: Input should be a valid list (got 'ccc")
    assert "...) [from SRC-cards]" in cards and len(cards) < 200


def test_hidden_location_parts_are_left_out() -> None:
    assert field_path(("workloads", 0, "fixed", "value")) == "workloads[0].fixed.value"
    assert (
        field_path(("workloads", 0, "fixed", "value"), lambda p: p == "fixed")
        == "workloads[0].value"
    )


def test_several_problems_come_one_per_line_under_the_head_and_one_on_the_head_line() -> None:
    several = error(Node, {"name": 5, "cards": [{"memory": 0}]})
    assert listed_problems(several, "file f.yaml").splitlines() == [
        "file f.yaml:",
        "  name: Input should be a valid string (got 5)",
        "  cards[0].memory: Input should be greater than 0 (got 0)",
    ]
    assert listed_problems(error(Node, {}), "file f.yaml") == "file f.yaml: name: Field required"
