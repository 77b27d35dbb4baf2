mod common;

use common::*;
use muster_protocol::*;

#[tokio::test]
async fn one_member_joins_syncs_and_heartbeats() -> anyhow::Result<()> {
    let server = start_server(fast_config());
    let mut conn = Conn::connect(server.local_addr(), "c1").await?;
    let first = as_join(conn.call(join_request("g", "", 10_000, 10_000)).await?);
    assert_eq!(first.error_code, ErrorCode::MemberIdRequired.code());
    assert!(first.member_id.starts_with("c1-"));
    let joined = as_join(
        conn.call(join_request("g", &first.member_id, 10_000, 10_000))
            .await?,
    );
    assert_eq!(joined.error_code, 0);
    assert_eq!(joined.generation_id, 1);
    assert_eq!(joined.leader_id, first.member_id);
    let assignment = MemberAssignment {
        member_id: first.member_id.clone(),
        partitions: vec![TopicPartitions {
            topic: "orders".into(),
            partitions: vec![0, 1],
        }],
        user_data: vec![],
    };
    let synced = as_sync(
        conn.call(sync_request("g", 1, &first.member_id, vec![assignment]))
            .await?,
    );
    assert_eq!(synced.error_code, 0);
    assert_eq!(synced.partitions[0].partitions, vec![0, 1]);
    assert_eq!(
        as_heartbeat(conn.call(heartbeat("g", 1, &first.member_id)).await?),
        0
    );
    server.stop();
    Ok(())
}
