"""Print the API's OpenAPI schema (the frontend's types are generated from it)."""

from __future__ import annotations

import json

from backend.app import create_app


def main() -> None:
    print(json.dumps(create_app().openapi(), indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
