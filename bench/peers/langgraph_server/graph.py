"""The ping-pong loop as a LangGraph graph, for `langgraph dev` (bench/http): two nodes
hand the ball to each other, each validating what it returns with a precompiled JSON
Schema validator (as claij checks every transition), until it was hit `rounds` times."""

from typing import TypedDict

from jsonschema import Draft202012Validator
from langgraph.graph import END, START, StateGraph

BALL = Draft202012Validator(
    {
        "type": "object",
        "required": ["n", "rounds", "player"],
        "properties": {
            "n": {"type": "integer", "minimum": 0},
            "rounds": {"type": "integer", "minimum": 1},
            "player": {"type": "string", "enum": ["ping", "pong"]},
        },
    }
)


class Ball(TypedDict):
    n: int
    rounds: int
    player: str


def hit(me: str, you: str):
    def node(state: Ball) -> dict:
        out = {"n": state["n"] + 1, "rounds": state["rounds"], "player": you}
        BALL.validate(out)
        return out

    node.__name__ = me
    return node


def after(me: str, you: str):
    def route(state: Ball) -> str:
        return END if state["n"] >= state["rounds"] else you

    return route


builder = StateGraph(Ball)
builder.add_node("ping", hit("ping", "pong"))
builder.add_node("pong", hit("pong", "ping"))
builder.add_edge(START, "ping")
builder.add_conditional_edges("ping", after("ping", "pong"))
builder.add_conditional_edges("pong", after("pong", "ping"))
graph = builder.compile()
