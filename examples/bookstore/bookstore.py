"""A bookstore written as TODS intends: plain Python objects with
references between them, made persistent by reachability from a root,
changed in transactions, found by queries. No I/O code: the only calls
to the store are db.root, db.transact and db.query.

    PYTHONPATH=python python3 examples/bookstore/bookstore.py   # a demo against the node of the credentials file
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))

import cairn  # noqa: E402
from cairn.persistent import Persistent, PersistentDict, PersistentList, SortedMap  # noqa: E402


class OutOfStock(Exception):
    """An order asked for more copies than the store has."""


class Author(Persistent):
    def __init__(self, name):
        self.name = name
        self.books = PersistentList()


class Book(Persistent):
    def __init__(self, isbn, title, author, price, stock):
        self.isbn, self.title, self.author = isbn, title, author
        self.price, self.stock = price, stock


class Customer(Persistent):
    def __init__(self, name):
        self.name = name
        self.orders = PersistentList()


class Order(Persistent):
    def __init__(self, customer, lines):
        self.customer = customer
        self.lines = lines  # [{"book": Book, "qty": n}]: a plain list, in the order's document
        self.total = round(sum(line["book"].price * line["qty"] for line in lines), 2)
        self.status = "placed"


class Store:
    """The store's objects hang off the space's root: a catalog by ISBN (a
    SortedMap: one object per entry, however many books), the authors and
    the customers by name."""

    def __init__(self, db, space):
        self.db, self.space = db, space
        root = db.root(space)

        def init():  # the check inside: two first openers do not both make one
            if "catalog" not in root:
                root["catalog"] = SortedMap()
                root["authors"] = PersistentDict()
                root["customers"] = PersistentDict()
        db.transact(init)
        self.root = root

    def add_book(self, isbn, title, author_name, price, stock):
        def add():
            authors = self.root["authors"]
            author = authors.get(author_name)
            if author is None:
                author = authors[author_name] = Author(author_name)
            book = Book(isbn, title, author, price, stock)
            author.books.append(book)        # reachable from the root: stored
            self.root["catalog"][isbn] = book
            return book
        return self.db.transact(add)

    def customer(self, name):
        def get():
            customers = self.root["customers"]
            if name not in customers:
                customers[name] = Customer(name)
            return customers[name]
        return self.db.transact(get)

    def order(self, customer_name, items):
        """Places an order of [(isbn, qty)...] for a customer: the stock of
        every book goes down and the order is recorded, all or nothing."""
        def place():
            customer = self.root["customers"][customer_name]
            lines = []
            for isbn, qty in items:
                book = self.root["catalog"][isbn]
                if book.stock < qty:
                    raise OutOfStock(f"{book.title}: {book.stock} left, {qty} asked")
                book.stock -= qty
                lines.append({"book": book, "qty": qty})
            order = Order(customer, lines)
            customer.orders.append(order)
            return order
        return self.db.transact(place, retries=100)

    def book(self, isbn):
        return self.db.transact(lambda: self.root["catalog"][isbn])

    def cheaper_than(self, price):
        """Books under a price, by a query the store answers from the
        documents (an index on doc.price serves it, if declared)."""
        return self.db.transact(lambda: self.db.query(self.space, f'doc.type == "Book" && doc.price < {price}', order_by="key"))

    def revenue(self):
        return self.db.transact(lambda: round(sum(o.total for o in self.db.query(self.space, 'doc.type == "Order"')), 2))


def main():
    db = cairn.connect()
    space = sys.argv[1] if len(sys.argv) > 1 else "bookstore"
    try:
        db.client.create_space(space)
    except cairn.CairnError as e:
        if e.code not in ("BucketAlreadyExists", "BucketAlreadyOwnedByYou"):
            raise
    store = Store(db, space)
    if "978-0" not in list(store.root["catalog"].keys()):
        store.add_book("978-0", "Transparent Persistence", "Atkinson", 31.5, 3)
        store.add_book("978-1", "Object Stores", "Zdonik", 19.0, 10)
    store.customer("ada")
    order = store.order("ada", [("978-0", 1), ("978-1", 2)])
    print(f"order {cairn.persistent.ref(order)}: {order.total} for {order.customer.name}")
    print("left:", {isbn: b.stock for isbn, b in store.root["catalog"].items()})
    print("under 20:", [b.title for b in store.cheaper_than(20)])
    print("revenue:", store.revenue())


if __name__ == "__main__":
    main()
