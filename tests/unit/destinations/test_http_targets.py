"""Each target's judgement of an answer: accepted, retriable or permanent (pure)."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from proxy.destinations.http.datahub import DataHubTarget
from proxy.destinations.http.destination import parse_retry_after
from proxy.destinations.http.egeria import EgeriaTarget
from proxy.destinations.http.generic import GenericHttpTarget
from proxy.destinations.http.marquez import MarquezTarget
from proxy.destinations.http.targets import TARGETS, HttpTargetConfig

marquez = MarquezTarget(kind="marquez")
egeria = EgeriaTarget(kind="egeria", url="https://egeria:9443", server="s1", user="u1")
datahub = DataHubTarget(kind="datahub", url="http://gms:8080")
generic = GenericHttpTarget(kind="http", url="http://x/hook")


@pytest.mark.parametrize(
    ("target", "status", "body", "accepted", "retriable"),
    [
        (marquez, 201, b"", True, False),
        (marquez, 422, b'{"errors":["run.runId must not be null"]}', False, False),
        (marquez, 400, b'{"code":400}', False, False),
        (marquez, 500, b'{"code":400,"message":"Unable to process JSON"}', False, False),
        (marquez, 500, b'{"code":500}', False, True),
        (marquez, 500, b"<html>oops</html>", False, True),
        (marquez, 503, b"", False, True),
        (marquez, 429, b"", False, True),
        (egeria, 200, b'{"class":"VoidResponse","relatedHTTPCode":200}', True, False),
        (egeria, 200, b'{"relatedHTTPCode":404,"exceptionErrorMessage":"no server"}', False, True),
        (egeria, 200, b'{"relatedHTTPCode":422}', False, False),
        (egeria, 200, b'{"relatedHTTPCode":400}', False, False),
        (egeria, 200, b'{"relatedHTTPCode":503}', False, True),
        (egeria, 200, b"", True, False),
        (egeria, 502, b"", False, True),
        (datahub, 200, b"", True, False),
        (datahub, 202, b"", True, False),
        (datahub, 400, b"", False, False),
        (datahub, 401, b"", False, True),
        (generic, 204, b"", True, False),
        (generic, 413, b"", False, False),
        (generic, 408, b"", False, True),
    ],
)
def test_target_judges_answer(target, status, body, accepted, retriable):
    verdict = target.judge(status, body)
    assert (verdict.accepted, verdict.retriable) == (accepted, retriable), verdict.reason


def test_egeria_failure_reason_carries_its_message():
    verdict = egeria.judge(200, b'{"relatedHTTPCode":404,"exceptionErrorMessage":"OMAG-404"}')
    assert verdict.reason == "Egeria relatedHTTPCode 404: OMAG-404"


def test_marquez_malformed_json_reason_names_it():
    assert "could not parse" in marquez.judge(500, b'{"code":400}').reason


def test_endpoints_follow_each_targets_documented_path():
    assert marquez.endpoint() == "http://localhost:5000/api/v1/lineage"
    assert egeria.endpoint() == (
        "https://egeria:9443/servers/s1/open-metadata/integration-services/"
        "lineage-integrator/users/u1/api/v1/lineage"
    )
    assert datahub.endpoint() == "http://gms:8080/openapi/openlineage/api/v1/lineage"
    assert generic.endpoint() == "http://x/hook"


def test_auth_headers_bearer_from_env_and_basic(monkeypatch):
    monkeypatch.setenv("DH_TOKEN", "s3cret")
    target = DataHubTarget.model_validate(
        {"kind": "datahub", "auth": {"type": "bearer", "token_env": "DH_TOKEN"}}
    )
    assert target.request_headers()["Authorization"] == "Bearer s3cret"
    basic = GenericHttpTarget.model_validate(
        {
            "kind": "http",
            "url": "http://x",
            "auth": {"type": "basic", "username": "a", "password": "b"},
        }
    )
    assert basic.request_headers()["Authorization"] == "Basic YTpi"


def test_config_union_picks_model_by_kind_and_forbids_unknown_keys():
    adapter = TypeAdapter(HttpTargetConfig)
    for kind, model in TARGETS.items():
        assert isinstance(adapter.validate_python({"kind": kind, "url": "http://h"}), model)
    with pytest.raises(ValidationError, match="extra"):
        adapter.validate_python({"kind": "marquez", "urll": "http://h"})
    with pytest.raises(ValidationError, match="http://"):
        adapter.validate_python({"kind": "http", "url": "ftp://h"})
    with pytest.raises(ValidationError, match="batch_events"):
        adapter.validate_python({"kind": "marquez", "batch_events": 10})


def test_retry_after_seconds_and_http_date():
    assert parse_retry_after("7") == 7.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == 10.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None
