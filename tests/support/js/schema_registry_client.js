// The npm registry client @kafkajs/confluent-schema-registry against the broker's Schema
// Registry: registers an Avro, a Protobuf (as .proto text, as this client sends it) and a
// JSON schema, encodes and decodes a value with each, and prints one JSON line of what it saw.
// Usage: node schema_registry_client.js REGISTRY_URL SUBJECT_PREFIX
const { SchemaRegistry, SchemaType } = require('@kafkajs/confluent-schema-registry')

async function main () {
  const [url, prefix] = process.argv.slice(2)
  const registry = new SchemaRegistry({ host: url })
  const out = {}
  const avro = { type: 'record', name: 'JsUser', namespace: 'com.example', fields: [{ name: 'name', type: 'string' }, { name: 'age', type: 'int' }] }
  const a = await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(avro) }, { subject: `${prefix}-avro-value` })
  const a2 = await registry.register({ type: SchemaType.AVRO, schema: JSON.stringify(avro) }, { subject: `${prefix}-avro-value` })
  const encoded = await registry.encode(a.id, { name: 'ann', age: 41 })
  out.avro = { id: a.id, again: a2.id, decoded: await registry.decode(encoded), magic: encoded[0], framedId: encoded.readInt32BE(1) }
  const proto = 'syntax = "proto3";\npackage kafkalog.js;\n\nmessage Point {\n  int32 x = 1;\n  int32 y = 2;\n  string label = 3;\n}\n'
  const p = await registry.register({ type: SchemaType.PROTOBUF, schema: proto }, { subject: `${prefix}-proto-value` })
  const pe = await registry.encode(p.id, { x: 3, y: 4, label: 'p' })
  out.proto = { id: p.id, decoded: await registry.decode(pe), latest: await registry.getLatestSchemaId(`${prefix}-proto-value`) }
  const json = { $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] }
  const j = await registry.register({ type: SchemaType.JSON, schema: JSON.stringify(json) }, { subject: `${prefix}-json-value` })
  const je = await registry.encode(j.id, { n: 7 })
  out.json = { id: j.id, decoded: await registry.decode(je) }
  try {
    await registry.encode(j.id, { n: 'not a number' })
    out.json.invalidRefused = false
  } catch (e) {
    out.json.invalidRefused = true
  }
  console.log(JSON.stringify(out))
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1) })
