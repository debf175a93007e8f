import threading

import pytest

import cairn
from bookstore import Book, Order, OutOfStock, Store


def open_store(space):
    return Store(cairn.connect(client=cairn.Client()), space)


def test_orders_change_stock_and_persist(space):
    s = open_store(space)
    s.add_book("1", "One", "A", 10.0, 5)
    s.add_book("2", "Two", "A", 25.0, 1)
    s.customer("ada")
    o = s.order("ada", [("1", 2), ("2", 1)])
    assert o.total == 45.0 and o.status == "placed"
    # Another connection sees it all, through references.
    t = open_store(space)
    ada = t.root["customers"]["ada"]
    assert [line["book"].title for line in ada.orders[0].lines] == ["One", "Two"]
    assert ada.orders[0].customer is ada
    assert t.book("1").stock == 3 and t.book("2").stock == 0
    assert [b.title for b in t.root["authors"]["A"].books] == ["One", "Two"]


def test_out_of_stock_changes_nothing(space):
    s = open_store(space)
    s.add_book("1", "One", "A", 10.0, 1)
    s.add_book("2", "Two", "A", 10.0, 5)
    s.customer("bob")
    with pytest.raises(OutOfStock):
        s.order("bob", [("2", 2), ("1", 2)])  # the second line fails: the first is undone
    t = open_store(space)
    assert t.book("2").stock == 5 and len(t.root["customers"]["bob"].orders) == 0


def test_concurrent_orders_never_oversell(space):
    s = open_store(space)
    s.add_book("1", "Scarce", "A", 5.0, 10)
    for name in ("c0", "c1", "c2", "c3"):
        s.customer(name)
    placed, refused = [], []

    def buyer(name):
        store = open_store(space)  # a connection of its own
        for _ in range(5):
            try:
                store.order(name, [("1", 1)])
                placed.append(name)
            except OutOfStock:
                refused.append(name)
    threads = [threading.Thread(target=buyer, args=(n,)) for n in ("c0", "c1", "c2", "c3")]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(placed) == 10 and len(refused) == 10
    t = open_store(space)
    assert t.book("1").stock == 0
    assert sum(len(t.root["customers"][n].orders) for n in ("c0", "c1", "c2", "c3")) == 10
    assert t.revenue() == 50.0


def test_queries_find_objects(space):
    s = open_store(space)
    s.add_book("1", "Cheap", "A", 5.0, 1)
    s.add_book("2", "Dear", "B", 50.0, 1)
    got = s.cheaper_than(20)
    assert [b.title for b in got] == ["Cheap"] and isinstance(got[0], Book)
    s.customer("c")
    s.order("c", [("1", 1)])
    orders = s.db.transact(lambda: s.db.query(space, 'doc.type == "Order" && doc.total > 1'))
    assert len(orders) == 1 and isinstance(orders[0], Order) and orders[0].lines[0]["book"].title == "Cheap"
