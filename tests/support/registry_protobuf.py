"""Test support: Protobuf message classes built at run time (no generated code committed),
for the Schema Registry tests: ``kafkalog.test.Order`` in ``kafkalog_test/order.proto``,
which imports ``kafkalog_test/customer.proto`` (a reference the serializer registers) and
``google/protobuf/timestamp.proto`` (a well-known type it does not).

``order_classes()`` returns the Order class (cached; its pool holds the three files).
Thread-safety: test-process only.
"""

from __future__ import annotations

from functools import cache

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, timestamp_pb2

F = descriptor_pb2.FieldDescriptorProto


@cache
def order_classes():
    pool = descriptor_pool.DescriptorPool()
    ts = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(ts)
    pool.Add(ts)
    customer = descriptor_pb2.FileDescriptorProto(name="kafkalog_test/customer.proto", package="kafkalog.test",
                                                  syntax="proto3")
    msg = customer.message_type.add(name="Customer")
    msg.field.add(name="name", number=1, type=F.TYPE_STRING, label=F.LABEL_OPTIONAL)
    pool.Add(customer)
    order = descriptor_pb2.FileDescriptorProto(
        name="kafkalog_test/order.proto", package="kafkalog.test", syntax="proto3",
        dependency=["kafkalog_test/customer.proto", "google/protobuf/timestamp.proto"])
    msg = order.message_type.add(name="Order")
    msg.field.add(name="id", number=1, type=F.TYPE_INT64, label=F.LABEL_OPTIONAL)
    msg.field.add(name="customer", number=2, type=F.TYPE_MESSAGE, type_name=".kafkalog.test.Customer",
                  label=F.LABEL_OPTIONAL)
    msg.field.add(name="created", number=3, type=F.TYPE_MESSAGE, type_name=".google.protobuf.Timestamp",
                  label=F.LABEL_OPTIONAL)
    pool.Add(order)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("kafkalog.test.Order"))
