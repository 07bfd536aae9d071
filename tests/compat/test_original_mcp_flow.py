"""The original OpenFable project's end-to-end MCP flow, against this server.

Source: github.com/alainbrown/openfable, e2e/test_mcp_server.py at a635f59: a client connects
to the SSE endpoint (/v1/mcp/sse), ingests three documents of made-up facts, then asks three
questions whose answers only those documents hold. The original drove it with an LLM agent
(mcp-use and a local qwen3 model) and checked the agent's reply; here the same calls are made
directly, with no model, and the facts are checked in what the server gives the agent to read:
the passages `query` returns. Changed as the issue allows: a token on the connection, integer
ids. The tools are this server's (`ingest_document`, `query`): the original's were its REST
operations turned into tools, which an agent picks by their descriptions, not their names.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from tests.compat.conftest import Person, connect, run_async

pytestmark = pytest.mark.slow  # three documents indexed with the real local embedding model

# The original's three documents, word for word.
DOCUMENT_XENOBIOLOGY = """\
# Xenobiology Research at Haldane Station

In 2031, Dr. Yuki Tanaka discovered the Cephalon organism in the subsurface
ocean of Europa during the Haldane Station expedition. The organism is the first
known example of silicate-based metabolism outside Earth.

## Morphology

Cephalon colonies consist of approximately 10^8 individual cells arranged in
a radial lattice. Each cell measures 0.4 micrometers in diameter. The colony
communicates via bioluminescent pulses emitted at a wavelength of 340 nanometers.

## Metabolic Pathway

Unlike terrestrial life, Cephalon reduces dissolved silicates using hydrogen
sulfide as an electron donor. The net reaction produces crystalline silicon
dioxide and water. Dr. Tanaka named this pathway "lithotrophic silicification"
and published the findings in the journal Astrobiology Frontiers, volume 12.
"""

DOCUMENT_MATERIALS = """\
# Veridium: A Next-Generation Structural Alloy

Veridium is a ruthenium-osmium lattice alloy developed in 2028 by Dr. Emil
Volkov at Kazan Federal University. It was designed for extreme-environment
aerospace applications.

## Mechanical Properties

Veridium exhibits a tensile strength of 4,200 MPa — roughly three times
that of conventional titanium alloys. Its melting point is 3,847 degrees
Celsius. The alloy maintains structural integrity under radiation doses
exceeding 500 Gray, making it suitable for deep-space hull construction.

## Applications

The first large-scale deployment of Veridium was the Tiangong-4 space station
hull, manufactured in 2030. The hull panels are 2.3 millimeters thick and
weigh 40% less than equivalent steel panels. Veridium is produced exclusively
at the Volkov Advanced Materials Laboratory in Kazan, Russia.
"""

DOCUMENT_TREATY = """\
# The Treaty of Meridian

The Treaty of Meridian was signed on March 15, 2033 in Reykjavik, Iceland
by representatives of 14 Arctic and near-Arctic nations. The treaty established
the Arctic Sovereignty Framework, a binding international agreement governing
resource extraction, shipping lanes, and environmental protection north of
the 70th parallel.

## Negotiation

Negotiations were led by Ambassador Clara Nystrom of Sweden over a period of
18 months. The key sticking point was subsea mining rights in the Lomonosov
Ridge region, which was resolved by creating a shared-revenue zone administered
by the newly formed Polar Commons Authority.

## Ratification

By December 2035, 127 nations had ratified the treaty. The Polar Commons
Authority is headquartered in Tromso, Norway and has an annual operating
budget of 840 million euros. Its first chair was Dr. Anika Bergsdottir
of Iceland.
"""

# The original's questions, and the words its assertions looked for in the answer.
QUESTIONS = [
    ("Who discovered the Cephalon organism and on which moon?", [["tanaka"], ["europa"]]),
    ("What is the tensile strength of Veridium and who developed it?", [["4,200", "4200"], ["volkov"]]),
    (
        "Where was the Treaty of Meridian signed and who led negotiations?",
        [["reykjavik"], ["nystrom", "nyström"]],
    ),
]


async def _call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, [getattr(block, "text", "") for block in result.content]
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def test_agent_flow_ingests_three_documents_and_finds_each_fact(
    live_url: str, person: Person, eager_tasks: None
) -> None:
    async def scenario() -> None:
        async with connect(live_url, "sse", person.key) as client:  # the original's transport
            tools = {tool.name for tool in (await client.list_tools()).tools}
            assert {"ingest_document", "query"} <= tools
            for text in (DOCUMENT_XENOBIOLOGY, DOCUMENT_MATERIALS, DOCUMENT_TREATY):  # test_01 .. 03
                added = await _call(client, "ingest_document", text=text, wait=True)
                assert added["document"]["status"] == "indexed", added
            for question, wanted in QUESTIONS:  # test_04 .. 06
                found = await _call(client, "query", query=question, token_budget=2000)
                context = " ".join(chunk["content"] for chunk in found["chunks"]).lower()
                for spellings in wanted:
                    assert any(word in context for word in spellings), (question, spellings, context)

    run_async(scenario)
