"""GoCD's profile views: AngularJS form fragments generated from the field tables, so each setting has
exactly one input bound with `ng-model="KEY"` and exactly one server error span.

GoCD compiles the fragment with AngularJS, so any `{{...}}` in the page is evaluated: help texts that
mention the `{{ POD_POSTFIX }}` placeholders are marked `ng-non-bindable` to show them as written.
"""

from __future__ import annotations

from html import escape

from profiles.fields import CLUSTER_FIELDS, ELASTIC_FIELDS, Field


def _input(field: Field) -> str:
    model = escape(field.key)
    if field.widget == "textarea":
        return f'<textarea ng-model="{model}" rows="8" spellcheck="false"></textarea>'
    if field.widget in ("select", "boolean"):
        options = field.choices if field.widget == "select" else ("true", "false")
        items = "".join(f'<option value="{escape(o)}">{escape(o)}</option>' for o in options)
        return f'<select ng-model="{model}">{items}</select>'
    kind = "password" if field.widget == "password" else "text"
    return f'<input type="{kind}" ng-model="{model}" autocomplete="off"/>'


def _error_span(key: str) -> str:
    # The exact shape GoCD's UI fills with a validation message (docs/architecture.md, "Requests").
    return (
        f'<span class="form_error" ng-show="GOINPUTNAME[{key}].$error.server">'
        f"{{{{GOINPUTNAME[{key}].$error.server}}}}</span>"
    )


def _block(field: Field) -> str:
    shown = f' ng-show="{escape(field.show_when)}"' if field.show_when else ""
    star = '<span class="asterisk">*</span>' if field.required else ""
    return (
        f'<div class="form_item_block"{shown}>\n'
        f"  <label>{escape(field.label)}{star}</label>\n"
        f"  {_input(field)}\n"
        f"  {_error_span(escape(field.key))}\n"
        f'  <span class="form_help" ng-non-bindable>{escape(field.help)}</span>\n'
        "</div>\n"
    )


def _view(fields: tuple[Field, ...]) -> str:
    return "".join(_block(field) for field in fields)


def cluster_profile_view() -> str:
    return _view(CLUSTER_FIELDS)


def elastic_profile_view() -> str:
    return _view(ELASTIC_FIELDS)
