"""Progress bars of the client's pool and of Message Batches, drawn so that a notebook's saved copy shows
how they ended.

A notebook bar is a widget; the notebook file keeps beside it the plain-text form it had when it was
first shown (`0%`), which is what an executed copy shows wherever the widget's state is not restored.
The bar here is shown under a display id and shown again when it closes, so the saved text is the
finished bar. A bar with nothing to do (no items, or every item already done) is not drawn at all.
"""

from __future__ import annotations

from typing import Any

from tqdm.auto import tqdm
from tqdm.notebook import tqdm_notebook


class _NotebookBar(tqdm):  # type: ignore[misc,valid-type]  # tqdm.auto's notebook class when in a kernel
    """The notebook bar, displayed under a display id that `close` updates with the final state."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, display=False, **kwargs)
        self._handle: Any = None
        if not self.disable:
            from IPython.display import display

            self._handle = display(self.container, display_id=True)

    def close(self) -> None:
        super().close()
        handle, self._handle = self._handle, None
        if handle is not None:
            handle.update(self.container)


def progress_bar(*, total: int, desc: str, unit: str, disable: bool = False, initial: int = 0) -> Any:
    """A tqdm bar over `total` items of which `initial` are done; disabled when there is nothing to do."""
    cls = _NotebookBar if issubclass(tqdm, tqdm_notebook) else tqdm
    return cls(total=total, initial=initial, desc=desc, unit=unit, disable=disable or total <= initial)
