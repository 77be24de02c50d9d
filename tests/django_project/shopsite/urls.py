"""No pages: the tests call views directly."""

urlpatterns: list[object] = []
