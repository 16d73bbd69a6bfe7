// KafkaJS against a kafkalog broker (tests/test_kafkajs.py): idempotent produce,
// transactions (commit, abort, sendOffsets), a read_committed consumer group, and
// describeGroups. Prints one JSON line of what it saw; exits 1 on any error.
// Usage: node kafkajs_workload.js <bootstrap> <topic> <group>
const { Kafka, logLevel } = require('kafkajs')

const [broker, topic, group] = process.argv.slice(2)
const kafka = new Kafka({ clientId: 'kafkajs-test', brokers: [broker], logLevel: logLevel.WARN })

async function main () {
  const admin = kafka.admin()
  await admin.connect()
  await admin.createTopics({ topics: [{ topic, numPartitions: 2 }], waitForLeaders: true })
  const producer = kafka.producer({ idempotent: true })
  await producer.connect()
  for (let i = 0; i < 20; i++) {
    await producer.send({ topic, acks: -1, messages: [{ key: 'k' + i, value: 'plain-' + i }] })
  }
  const txp = kafka.producer({ transactionalId: group + '-tid', idempotent: true, maxInFlightRequests: 1 })
  await txp.connect()
  const t1 = await txp.transaction()
  await t1.send({ topic, messages: [{ value: 'committed-0', partition: 0 }, { value: 'committed-1', partition: 1 }] })
  await t1.sendOffsets({ consumerGroupId: group + '-offsets', topics: [{ topic, partitions: [{ partition: 0, offset: '7' }] }] })
  await t1.commit()
  const t2 = await txp.transaction()
  await t2.send({ topic, messages: [{ value: 'aborted', partition: 0 }] })
  await t2.sendOffsets({ consumerGroupId: group + '-offsets', topics: [{ topic, partitions: [{ partition: 0, offset: '99' }] }] })
  await t2.abort()
  const offsets = await admin.fetchOffsets({ groupId: group + '-offsets', topics: [topic] })

  const consumer = kafka.consumer({ groupId: group, readUncommitted: false })
  await consumer.connect()
  await consumer.subscribe({ topic, fromBeginning: true })
  const seen = []
  let timer
  await new Promise((resolve) => {
    consumer.run({ eachMessage: async ({ message }) => {
      seen.push(message.value.toString())
      if (seen.length >= 22) resolve()
    } })
    timer = setTimeout(resolve, 30000)
  })
  clearTimeout(timer)
  const described = await admin.describeGroups([group])
  await consumer.disconnect()
  await producer.disconnect()
  await txp.disconnect()
  await admin.disconnect()
  const committed = offsets[0].partitions.find(p => p.partition === 0).offset
  console.log(JSON.stringify({ seen, committed, group_state: described.groups[0].state,
    members: described.groups[0].members.length }))
}

main().catch(e => { console.error('FAILED', e); process.exit(1) })
